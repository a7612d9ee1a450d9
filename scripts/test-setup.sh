#!/usr/bin/env bash
# The README's first command, tried as a new user would: a fresh clone of the
# committed tree, in a private mount namespace where the test-only tools are
# not there (chromium, node, npm, clang, the PostgreSQL server binaries,
# redis-server), runs `bash scripts/setup.sh demo` and must end with a
# completed run. Nothing is shared with the other build directories: the
# clone builds from scratch, so the time it prints is the demo's time from a
# fresh clone with the packages present.
#
# Usage: scripts/test-setup.sh [WORK_DIR]   (default: a new folder in /tmp)
# Needs root (unshare --mount, overlay and tmpfs mounts); make test-setup
# runs it.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

log() { printf 'test-setup: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

[[ $(id -u) == 0 ]] || die "needs root for a private mount namespace (unshare --mount)"
command -v unshare >/dev/null || die "unshare not found (Debian: util-linux)"

# What the demo must not need. Each program found on PATH is whited out by
# an overlay on its folder (the name no longer exists there, so neither
# `command -v` nor CMake's find_program finds it); the folders that hold
# the rest of these tools are covered by an empty read-only tmpfs.
readonly HIDDEN_DIRS=(/usr/lib/chromium /usr/lib/postgresql /usr/lib/llvm-14 /usr/lib/node_modules
                      /usr/share/nodejs /usr/lib/clang)
readonly HIDDEN_PROGRAMS=(chromium chromium-browser node nodejs npm npx clang clang++ clang-14 clang++-14
                          postgres pg_ctl initdb pg_ctlcluster redis-server)

work="${1:-}"
if [[ -z $work ]]; then
  work="$(mktemp -d /tmp/runloom-setup.XXXXXX)"
fi
mkdir -p "$work"
work="$(cd "$work" && pwd)"  # absolute: the namespace's shell changes folder
clone="$work/runloom"
rm -rf "$clone"
git clone -q "$repo" "$clone"
log "fresh clone of $(git -C "$clone" rev-parse --short HEAD) in $clone"

# Runs inside the namespace: hide, check that it is hidden, run the demo.
inner() {
  set -euo pipefail
  local p found dir i=0
  local -A names=()  # folder -> the names to white out in it
  for p in "${HIDDEN_PROGRAMS[@]}"; do
    while IFS= read -r found; do
      [[ -n $found ]] || continue
      dir="$(readlink -f "$(dirname "$found")")"
      names[$dir]+=" $(basename "$found")"
    done < <(type -ap "$p" 2>/dev/null || true)
  done
  mkdir -p "$work/hide"
  mount -t tmpfs runloom-hidden "$work/hide"
  for dir in "${!names[@]}"; do
    mkdir -p "$work/hide/$i/upper" "$work/hide/$i/work"
    for p in ${names[$dir]}; do
      [[ -e $work/hide/$i/upper/$p ]] || mknod "$work/hide/$i/upper/$p" c 0 0  # an overlay whiteout
    done
    mount -t overlay runloom-hidden \
      -o "lowerdir=$dir,upperdir=$work/hide/$i/upper,workdir=$work/hide/$i/work" "$dir"
    i=$(( i + 1 ))
  done
  for p in "${HIDDEN_DIRS[@]}"; do
    if [[ -d $p ]]; then mount -t tmpfs -o ro,size=64k runloom-hidden "$p"; fi
  done
  hash -r
  for p in "${HIDDEN_PROGRAMS[@]}"; do
    if command -v "$p" >/dev/null 2>&1; then
      die "$p is still reachable inside the namespace: $(command -v "$p")"
    fi
  done
  log "hidden: ${HIDDEN_PROGRAMS[*]} (overlays on ${!names[*]}) and ${HIDDEN_DIRS[*]}"
  cd "$clone"
  local start=$SECONDS
  bash scripts/setup.sh demo </dev/null 2>&1 | tee "$work/demo.log"
  log "setup.sh demo took $(( SECONDS - start )) s"
}

export -f inner log die
export clone work
HIDDEN_DIRS_LIST="${HIDDEN_DIRS[*]}" HIDDEN_PROGRAMS_LIST="${HIDDEN_PROGRAMS[*]}" \
  unshare --mount --propagation private bash -c '
    read -r -a HIDDEN_DIRS <<<"$HIDDEN_DIRS_LIST"
    read -r -a HIDDEN_PROGRAMS <<<"$HIDDEN_PROGRAMS_LIST"
    inner' || die "bash scripts/setup.sh demo failed (log: $work/demo.log)"

# `runloom run` ends with the run id and its final status.
grep -Eq '(^|[^a-z_])completed($|[^a-z_])' "$work/demo.log" ||
  die "the demo did not print a completed run (log: $work/demo.log)"
log "passed: the blog demo completed in a fresh clone without the test-only tools"
