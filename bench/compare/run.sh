#!/usr/bin/env bash
# runloom's embedded noop benchmark against BullMQ 3-job flows, on this
# machine, in alternating trials (issue 27: "embedded 3-step noop throughput
# at least 6x BullMQ flows in the same run, default durability; with
# --sync full at least 4x"). See bench/compare/README.md.
#
#   bench/compare/run.sh RUNLOOM_BIN [PAIRS=3] [RUNS=10000]
#   SYNC_FULL=1 bench/compare/run.sh build/runloom        # also --sync full
#
# What it does:
#   - starts its own redis-server on 127.0.0.1, on a free port, with its data
#     dir in a temp dir. Durability is Redis' as Debian ships it: Debian's
#     /etc/redis/redis.conf when readable (else the server's built-in
#     defaults, which persist the same way), overriding only port, bind, dir,
#     daemonize, pidfile and logfile. That is RDB snapshots (the default save
#     points: 1 change in 3600 s, 100 in 300 s, 10000 in 60 s; each one a
#     fork writing dump.rdb in the background) and appendonly no: an
#     acknowledged job can be lost on a crash. Nothing is turned off.
#   - runs `npm ci` in bench/compare/bullmq when its node_modules is missing;
#   - PAIRS times: `RUNLOOM_BIN bench --runs RUNS --json` (a fresh SQLite file
#     in the temp dir; 8 producer threads, 64 executors), then
#     `node bench/compare/bullmq/flows.mjs --runs RUNS` (8 producers, worker
#     concurrency 64) against that Redis, then, with SYNC_FULL=1,
#     `RUNLOOM_BIN bench --runs RUNS --json --sync full`. Redis is flushed
#     (FLUSHALL, then any background save waited for) before and after each
#     BullMQ trial, so it is empty and idle while runloom runs;
#   - prints every trial's JSON line on stdout as it ends, then a table:
#     runs/s and flows/s per pair, their ratio, and the median ratio.
# Progress goes to stderr. Redis and the temp dir are removed on exit.
set -euo pipefail

readonly HERE="$(cd "$(dirname "$0")" && pwd)"
die() { printf 'bench/compare/run.sh: %s\n' "$*" >&2; exit 2; }
usage() { die "usage: bench/compare/run.sh RUNLOOM_BIN [PAIRS=3] [RUNS=10000] (SYNC_FULL=1 adds --sync full trials)"; }

[[ $# -ge 1 && $# -le 3 ]] || usage
bin="$1"
readonly PAIRS="${2:-3}" RUNS="${3:-10000}" SYNC_FULL="${SYNC_FULL:-0}"
[[ $PAIRS =~ ^[1-9][0-9]?$|^100$ ]] || die "PAIRS must be an integer from 1 to 100, not '$PAIRS'"
[[ $RUNS =~ ^[1-9][0-9]{0,6}$ && $RUNS -le 1000000 ]] ||
  die "RUNS must be an integer from 1 to 1,000,000, not '$RUNS'"
[[ $SYNC_FULL == 0 || $SYNC_FULL == 1 ]] || die "SYNC_FULL must be 0 or 1, not '$SYNC_FULL'"
[[ -f $bin && -x $bin ]] || die "no executable at '$bin' (build it first, e.g. make cli)"
bin="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"
readonly bin
for tool in redis-server redis-cli node npm; do
  command -v "$tool" >/dev/null || die "'$tool' is missing (apt-get install redis-server nodejs npm)"
done
# BullMQ's own timeout: at least 300 s, more for big runs (50 flows/s at worst).
readonly TIMEOUT_S=$(( RUNS / 50 > 300 ? RUNS / 50 : 300 ))

dir="$(mktemp -d "${TMPDIR:-/tmp}/runloom-compare.XXXXXX")"
redis_pid="" port=""
cleanup() {
  local rc=$?
  if [[ -n $redis_pid ]] && kill -0 "$redis_pid" 2>/dev/null; then
    redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || kill -TERM "$redis_pid" 2>/dev/null || true
    wait "$redis_pid" 2>/dev/null || true
  fi
  rm -rf "$dir"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

rcli() { redis-cli -h 127.0.0.1 -p "$port" "$@"; }

# --- Redis ------------------------------------------------------------------
redis_conf=()
[[ -r /etc/redis/redis.conf ]] && redis_conf=(/etc/redis/redis.conf)
free_port() {
  node -e 'const s = require("net").createServer();
           s.listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); });'
}
for attempt in 1 2 3 4 5; do
  port="$(free_port)"
  redis-server "${redis_conf[@]}" --port "$port" --bind 127.0.0.1 --dir "$dir" \
    --daemonize no --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" &
  redis_pid=$!
  for _ in $(seq 50); do
    [[ "$(rcli ping 2>/dev/null || true)" == PONG ]] && break
    kill -0 "$redis_pid" 2>/dev/null || break
    sleep 0.1
  done
  [[ "$(rcli ping 2>/dev/null || true)" == PONG ]] && break
  kill -TERM "$redis_pid" 2>/dev/null || true
  wait "$redis_pid" 2>/dev/null || true
  redis_pid=""
  printf 'bench/compare/run.sh: redis-server did not start on port %s (attempt %s)\n' "$port" "$attempt" >&2
done
[[ -n $redis_pid ]] || { tail -n 20 "$dir/redis.log" >&2 2>/dev/null || true; die "could not start redis-server"; }
printf 'redis %s on 127.0.0.1:%s (pid %s), config: %s; save "%s", appendonly %s\n' \
  "$(redis-server --version | sed -n 's/.*v=\([^ ]*\).*/\1/p')" "$port" "$redis_pid" \
  "${redis_conf[0]:-built-in defaults}" "$(rcli config get save | sed -n 2p)" \
  "$(rcli config get appendonly | sed -n 2p)" >&2

# Empty, with no background save or rewrite still running.
flush_redis() {
  [[ "$(rcli flushall)" == OK ]] || die "FLUSHALL failed"
  for _ in $(seq 600); do
    if ! rcli info persistence | grep -Eq '^(rdb_bgsave|aof_rewrite)_in_progress:1'; then
      return 0
    fi
    sleep 0.1
  done
  die "a Redis background save still runs after 60 s"
}

# --- BullMQ -----------------------------------------------------------------
if [[ ! -d $HERE/bullmq/node_modules ]]; then
  printf 'npm ci in %s\n' "$HERE/bullmq" >&2
  (cd "$HERE/bullmq" && npm ci --no-audit --no-fund) >&2
fi

# --- Trials -----------------------------------------------------------------
# trial KIND OUTFILE: runs one trial, prints its JSON line, keeps it in OUTFILE.
trial() {
  local kind="$1" out="$2"
  local log="$dir/$kind.log"
  case "$kind" in
    runloom)
      TMPDIR="$dir" "$bin" bench --runs "$RUNS" --json >"$out" 2>"$log" || {
        tail -n 20 "$log" >&2; die "runloom bench failed"; } ;;
    runloom-sync-full)
      TMPDIR="$dir" "$bin" bench --runs "$RUNS" --json --sync full >"$out" 2>"$log" || {
        tail -n 20 "$log" >&2; die "runloom bench --sync full failed"; } ;;
    bullmq)
      flush_redis
      node "$HERE/bullmq/flows.mjs" --runs "$RUNS" --redis "redis://127.0.0.1:$port" \
        --redis-pid "$redis_pid" --timeout-s "$TIMEOUT_S" >"$out" 2>"$log" || {
        tail -n 20 "$log" >&2; die "BullMQ flows failed"; }
      flush_redis ;;
  esac
  # One JSON object, every run/flow completed.
  node -e '
    const [file, kind, runs] = process.argv.slice(1);
    const lines = require("fs").readFileSync(file, "utf8").trim().split("\n");
    const r = JSON.parse(lines[lines.length - 1]);
    if (r.completed !== Number(runs)) {
      console.error(`${kind}: ${r.completed} of ${runs} completed`);
      process.exit(1);
    }' "$out" "$kind" "$RUNS" || die "$kind: bad result in $out"
  tail -n 1 "$out"
}

kinds=(runloom bullmq)
[[ $SYNC_FULL == 1 ]] && kinds+=(runloom-sync-full)
flush_redis
for ((pair = 1; pair <= PAIRS; pair++)); do
  for kind in "${kinds[@]}"; do
    printf 'pair %s/%s: %s, %s runs\n' "$pair" "$PAIRS" "$kind" "$RUNS" >&2
    trial "$kind" "$dir/$pair.$kind.json"
  done
done

# --- Table ------------------------------------------------------------------
node - "$dir" "$PAIRS" "$SYNC_FULL" <<'EOF'
const fs = require('fs');
const [dir, pairs, syncFull] = process.argv.slice(2);
const read = (p, kind) => {
  const lines = fs.readFileSync(`${dir}/${p}.${kind}.json`, 'utf8').trim().split('\n');
  return JSON.parse(lines[lines.length - 1]);
};
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const full = syncFull === '1';
const head = ['pair', 'runloom runs/s', 'bullmq flows/s', 'ratio',
  'runloom MiB', 'node+redis MiB'];
if (full) head.push('sync=full runs/s', 'ratio (full)');
const rows = [], ratios = [], fullRatios = [];
for (let p = 1; p <= Number(pairs); p++) {
  const r = read(p, 'runloom'), b = read(p, 'bullmq');
  const ratio = r.runs_per_s / b.flows_per_s;
  ratios.push(ratio);
  const row = [String(p), r.runs_per_s.toFixed(0), b.flows_per_s.toFixed(0), ratio.toFixed(2) + 'x',
    r.peak_rss_mb.toFixed(1),
    `${b.peak_rss_mb.toFixed(1)}+${b.redis_peak_rss_mb == null ? '?' : b.redis_peak_rss_mb.toFixed(1)}`];
  if (full) {
    const f = read(p, 'runloom-sync-full');
    const fr = f.runs_per_s / b.flows_per_s;
    fullRatios.push(fr);
    row.push(f.runs_per_s.toFixed(0), fr.toFixed(2) + 'x');
  }
  rows.push(row);
}
const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
const line = (cells) => cells.map((c, i) => c.padStart(widths[i])).join('  ');
console.log('');
console.log(line(head));
for (const r of rows) console.log(line(r));
console.log(`median ratio: ${median(ratios).toFixed(2)}x (issue 27 goal: at least 6x)`);
if (full) console.log(`median ratio, --sync full: ${median(fullRatios).toFixed(2)}x (goal: at least 4x)`);
EOF
