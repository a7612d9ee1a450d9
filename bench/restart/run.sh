#!/usr/bin/env bash
# Kill -> completed when the same worker restarts (issue 27, acceptance 1).
#
#   bench/restart/run.sh RUNLOOM [TRIALS] [DB]
#
# RUNLOOM is the binary (e.g. build/runloom); DB is --db's value (default: a
# fresh SQLite file per trial in a temporary directory; a postgres:// URL uses
# that database for every trial). Each trial runs the 3-step workflow below
# with `runloom run` and a 1 h lease, SIGKILLs it once step b has started,
# starts `runloom worker --until-idle` on the same database at once, and
# reports the time from the kill to the run's finished_at (both read from this
# machine's clock), the run's attempts (2: the killed step reruns) and how
# often step a ran (1: a finished step does not rerun). A 1 h lease means only
# restart recovery can explain a completion within the trial; expiry cannot.
# Prints one line per trial, then the median.
set -euo pipefail
runloom="$(realpath "$1")"
trials="${2:-5}"
db_arg="${3:-}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cat >"$work/three.yaml" <<'YAML'
name: restart_bench
steps:
  - {id: a, kind: exec, command: "echo '{}'"}
  - {id: b, kind: exec, command: "sleep 0.2; echo '{}'"}
  - {id: c, kind: exec, command: "echo '{}'"}
YAML
results=()
for ((i = 1; i <= trials; ++i)); do
  db="${db_arg:-$work/t$i.db}"
  log="$work/run$i.log"
  "$runloom" run "$work/three.yaml" --db "$db" --lease-ttl 1h >"$log" 2>&1 &
  pid=$!
  for _ in $(seq 1 1000); do
    grep -q 'step started   b' "$log" && break
    sleep 0.005
  done
  kill -KILL "$pid"
  t_kill="$(date +%s.%N)"
  wait "$pid" 2>/dev/null || true
  "$runloom" worker --db "$db" --until-idle >"$work/worker$i.log" 2>&1
  run_id="$(grep -o 'run r_[0-9a-z]*' "$log" | head -1 | cut -d' ' -f2)"
  "$runloom" status "$run_id" --db "$db" --json >"$work/status$i.json"
  "$runloom" events "$run_id" --db "$db" --json >"$work/events$i.json"
  line="$(python3 - "$work/status$i.json" "$work/events$i.json" "$t_kill" <<'PY'
import collections, datetime, json, sys
st = json.load(open(sys.argv[1]))
fin = datetime.datetime.fromisoformat(st["finished_at"].replace("Z", "+00:00")).timestamp()
started = collections.Counter(e["data"].get("path") for e in map(json.loads, open(sys.argv[2]))
                              if e["type"] == "step.started")
print(f"{fin - float(sys.argv[3]):.3f} s: {st['status']}, attempts {st['attempts']}, "
      f"step starts a {started['a']} b {started['b']} c {started['c']}")
PY
)"
  echo "trial $i: kill -> completed in ${line}"
  results+=("${line%% *}")
done
printf '%s\n' "${results[@]}" | sort -n | awk '{v[NR]=$1} END {m = (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2; printf "median %.3f s over %d trials\n", m, NR}'
