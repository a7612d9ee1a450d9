#!/usr/bin/env bash
# `make test` only: the sanitizer builds (make build-asan, build-tsan,
# build-fuzz) run one after another in a background job at the lowest CPU
# priority (SCHED_IDLE: `chrt --idle 0`; `nice -n 19` where that is refused),
# started once the packages are installed. They take a core only when the
# step in front leaves it idle: the tests of the Release, ASan and TSan steps
# use about 1.3-1.5 of the 2 cores (they wait on processes, servers and
# sleeps), and a fresh-clone CI run spent ~300 core-seconds idle in the
# Release tests alone. A step that needs one of these builds waits for it
# (`wait`), then runs its own `cmake --build`, which has nothing left to do,
# or which builds what failed in the background and shows the error in the
# step's output. Each configuration is still built once.
#
#   scripts/prebuild.sh start STATE_DIR TARGET...  run `make TARGET` for each, in order, in the
#                                                  background; logs in STATE_DIR/TARGET.log
#   scripts/prebuild.sh wait STATE_DIR TARGET      return once TARGET's background build has ended
#                                                  (at once when no background job runs)
#   scripts/prebuild.sh stop STATE_DIR             end the background job (idempotent)
set -euo pipefail

die() { printf 'prebuild: %s\n' "$*" >&2; exit 1; }

[[ $# -ge 2 ]] || die "usage: $0 start STATE_DIR TARGET... | wait STATE_DIR TARGET | stop STATE_DIR"
cmd="$1"
state="$2"
shift 2

# Whether PID is still the background job: a pid file left by a `make test`
# that was killed outright may name a process that reused the number.
alive() {
  local cmdline
  { cmdline="$(tr '\0' ' ' <"/proc/$1/cmdline")"; } 2>/dev/null || return 1
  [[ $cmdline == *" prebuild $state "* ]]
}

# The job is its own process group (job control, `set -m`), so `stop` ends
# make and every compiler under it. Not its own session (setsid): with the
# kernel's autogroup scheduling (sched_autogroup_enabled, on in Debian's
# kernels) a new session is a new scheduling group that gets half the CPU
# whatever its tasks' policy; measured so, the idle-priority compilers took
# ~53 % of each core beside the Release build's ~45 %.
stop() {
  local pid
  [[ -s "$state/pid" ]] || return 0
  pid="$(cat "$state/pid")"
  if alive "$pid"; then
    kill -TERM -- "-$pid" 2>/dev/null || true
  fi
  rm -f "$state/pid"
}

case "$cmd" in
  start)
    [[ $# -ge 1 ]] || die "start: name at least one make target"
    stop
    rm -rf "$state"
    mkdir -p "$state"
    prio=(chrt --idle 0)
    "${prio[@]}" true 2>/dev/null || prio=(nice -n 19)
    # Each target's exit status goes to TARGET.rc when it ends, failed or not.
    # The job's bash leads its process group; it writes its own pid, the
    # group's id.
    set -m
    "${prio[@]}" bash -c '
      state="$1"; shift
      echo $$ >"$state/pid.new" && mv "$state/pid.new" "$state/pid"
      for t in "$@"; do
        rc=0 began=$SECONDS
        make --no-print-directory "$t" >"$state/$t.log" 2>&1 </dev/null || rc=$?
        echo "$t: $(( SECONDS - began )) s in the background, exit $rc" >>"$state/times.log"
        echo "$rc" >"$state/$t.rc"
      done' prebuild "$state" "$@" </dev/null >/dev/null 2>&1 &
    set +m
    for _ in $(seq 1 100); do
      [[ -s "$state/pid" ]] && break
      sleep 0.05
    done
    [[ -s "$state/pid" ]] || die "the background job did not start"
    echo "prebuild: $* in the background, one after another, under ${prio[*]} (logs: $state/)"
    ;;
  wait)
    [[ $# == 1 ]] || die "wait: name one make target"
    t="$1"
    [[ -s "$state/pid" ]] || exit 0
    pid="$(cat "$state/pid")"
    start=$SECONDS
    while [[ ! -f "$state/$t.rc" ]] && alive "$pid"; do
      sleep 1
    done
    if [[ -f "$state/$t.rc" ]]; then
      echo "prebuild: waited $(( SECONDS - start )) s for $t, built in the background (exit $(cat "$state/$t.rc"); log: $state/$t.log)"
    else
      echo "prebuild: the background job ended before $t; building it here"
    fi
    ;;
  stop) stop ;;
  *) die "unknown command '$cmd'; use start, wait or stop" ;;
esac
