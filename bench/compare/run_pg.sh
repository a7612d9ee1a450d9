#!/usr/bin/env bash
# runloom on PostgreSQL with 2 worker processes against DBOS Transact 3-step
# workflows, on one durable PostgreSQL 15 server of its own, in alternating
# trials (issue 27: "PostgreSQL: at least 10x DBOS on the same server with 2
# worker processes, and still within 10% of that at 50,000 runs per bench").
# See bench/compare/README.md.
#
#   bench/compare/run_pg.sh RUNLOOM_BIN [PAIRS=3] [RUNS=10000]
#   PG_BIN=/usr/lib/postgresql/15/bin bench/compare/run_pg.sh build/runloom   # the default
#
# What it does:
#   - initdb's and starts its own PostgreSQL (PG_BIN, default PostgreSQL 15
#     as Debian installs it) with its data dir in a temp dir, listening on
#     127.0.0.1 only, on a free port, with the durable settings of
#     docs/performance.md ("PostgreSQL and Redis"): initdb -U runloom
#     --auth=trust -E UTF8, then max_connections=300, fsync=on,
#     synchronous_commit=on, shared_buffers=128MB, everything else
#     PostgreSQL's defaults. PostgreSQL refuses to run as root: when root, the
#     server (initdb, pg_ctl) runs as the `postgres` user (runuser);
#     clients connect over TCP as the database user `runloom`;
#   - runs `npm ci` in bench/compare/dbos when its node_modules is missing;
#   - PAIRS times: a fresh database, `RUNLOOM_BIN bench --runs RUNS --db
#     postgres://runloom@127.0.0.1:PORT/rN --workers 2 --json` (this process
#     plus one `runloom worker` child; 8 producer threads per worker process,
#     so 16, all in the bench process), then a fresh database and `node
#     bench/compare/dbos/workflows.mjs --runs RUNS --db
#     postgres://runloom@127.0.0.1:PORT/dN --producers 16` (one node process,
#     16 concurrent starters like runloom's 16 producer threads; 8, 16 and 32
#     measured the same for DBOS). After each trial its database is dropped
#     and a CHECKPOINT taken, so the server is idle and clean when the next
#     one starts;
#   - prints every trial's JSON line on stdout as it ends, then a table:
#     runs/s and workflows/s per pair, their ratio, and the median ratio.
# Progress goes to stderr. The server and the temp dir are removed on exit,
# also on Ctrl-C.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
readonly HERE
die() { printf 'bench/compare/run_pg.sh: %s\n' "$*" >&2; exit 2; }
usage() { die "usage: bench/compare/run_pg.sh RUNLOOM_BIN [PAIRS=3] [RUNS=10000] (PG_BIN=dir of initdb, pg_ctl, psql)"; }

[[ $# -ge 1 && $# -le 3 ]] || usage
bin="$1"
readonly PAIRS="${2:-3}" RUNS="${3:-10000}" PG_BIN="${PG_BIN:-/usr/lib/postgresql/15/bin}"
[[ $PAIRS =~ ^[1-9][0-9]?$|^100$ ]] || die "PAIRS must be an integer from 1 to 100, not '$PAIRS'"
[[ $RUNS =~ ^[1-9][0-9]{0,6}$ && $RUNS -le 1000000 ]] ||
  die "RUNS must be an integer from 1 to 1,000,000, not '$RUNS'"
[[ -f $bin && -x $bin ]] || die "no executable at '$bin' (build it first, e.g. make cli)"
bin="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"
readonly bin
for tool in initdb pg_ctl psql; do
  [[ -x $PG_BIN/$tool ]] || die "no $PG_BIN/$tool (apt-get install postgresql-15, or set PG_BIN)"
done
for tool in node npm; do
  command -v "$tool" >/dev/null || die "'$tool' is missing (apt-get install nodejs npm)"
done
# As root the server runs as `postgres` (PostgreSQL refuses root).
as_pg=()
if [[ $(id -u) == 0 ]]; then
  id postgres >/dev/null 2>&1 || die "running as root needs a 'postgres' user to run the server as"
  command -v runuser >/dev/null || die "'runuser' is missing (util-linux)"
  as_pg=(runuser -u postgres --)
fi
# Producers on each side: runloom bench starts 8 per worker process.
readonly WORKERS=2 PRODUCERS=16
# DBOS's own timeout: at least 600 s, more for big runs (25 workflows/s at worst).
readonly TIMEOUT_S=$(( RUNS / 25 > 600 ? RUNS / 25 : 600 ))

dir="$(mktemp -d "${TMPDIR:-/tmp}/runloom-compare-pg.XXXXXX")"
readonly pgdir="$dir/pg"
port="" started=0
# Stops the server if one runs on the data dir (also one whose start timed out).
pg_stop() {
  if [[ $started == 1 || -f $pgdir/data/postmaster.pid ]]; then
    "${as_pg[@]}" "$PG_BIN/pg_ctl" -D "$pgdir/data" -m fast -w -t 60 stop >/dev/null 2>&1 || true
  fi
  started=0
}
cleanup() {
  local rc=$?
  pg_stop
  rm -rf "$dir"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- PostgreSQL -------------------------------------------------------------
mkdir "$pgdir"
if [[ ${#as_pg[@]} -gt 0 ]]; then
  chmod 711 "$dir"            # postgres passes through; the rest stays root's
  chown postgres: "$pgdir"
fi
chmod 700 "$pgdir"
"${as_pg[@]}" "$PG_BIN/initdb" -D "$pgdir/data" -U runloom --auth=trust -E UTF8 \
  >"$dir/initdb.log" 2>&1 || { tail -n 20 "$dir/initdb.log" >&2; die "initdb failed"; }

psql_() {
  PGOPTIONS='-c client_min_messages=warning' \
    "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U runloom "$@"
}
free_port() {
  node -e 'const s = require("net").createServer();
           s.listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); });'
}
for attempt in 1 2 3 4 5; do
  port="$(free_port)"
  if "${as_pg[@]}" "$PG_BIN/pg_ctl" -D "$pgdir/data" -l "$pgdir/server.log" -w -t 60 start \
      -o "-p $port -c listen_addresses=127.0.0.1 -c unix_socket_directories=$pgdir \
          -c max_connections=300 -c fsync=on -c synchronous_commit=on -c shared_buffers=128MB" \
      >/dev/null 2>&1; then
    started=1
    break
  fi
  pg_stop
  printf 'bench/compare/run_pg.sh: PostgreSQL did not start on port %s (attempt %s)\n' "$port" "$attempt" >&2
done
[[ $started == 1 ]] || { tail -n 20 "$pgdir/server.log" >&2 2>/dev/null || true; die "could not start PostgreSQL"; }
printf 'postgres %s on 127.0.0.1:%s, data in %s; fsync %s, synchronous_commit %s, shared_buffers %s, max_connections %s\n' \
  "$(psql_ -d postgres -Atc 'SHOW server_version')" "$port" "$pgdir/data" \
  "$(psql_ -d postgres -Atc 'SHOW fsync')" "$(psql_ -d postgres -Atc 'SHOW synchronous_commit')" \
  "$(psql_ -d postgres -Atc 'SHOW shared_buffers')" "$(psql_ -d postgres -Atc 'SHOW max_connections')" >&2

# fresh_db NAME: an empty database NAME (dropped first if it exists).
fresh_db() {
  psql_ -d postgres -c "DROP DATABASE IF EXISTS \"$1\"" -c "CREATE DATABASE \"$1\"" >/dev/null
}
# drop_db NAME: drop it, then write out every dirty buffer, so the next trial
# starts on an idle server.
drop_db() {
  psql_ -d postgres -c "DROP DATABASE IF EXISTS \"$1\" WITH (FORCE)" -c CHECKPOINT >/dev/null
}

# --- DBOS -------------------------------------------------------------------
if [[ ! -d $HERE/dbos/node_modules ]]; then
  printf 'npm ci in %s\n' "$HERE/dbos" >&2
  (cd "$HERE/dbos" && npm ci --no-audit --no-fund) >&2
fi

# --- Trials -----------------------------------------------------------------
# trial KIND PAIR OUTFILE: runs one trial on a fresh database, prints its JSON
# line, keeps it in OUTFILE.
trial() {
  local kind="$1" pair="$2" out="$3" db url
  local log="$dir/$pair.$kind.log"
  case "$kind" in
    runloom) db="r$pair" ;;
    dbos) db="d$pair" ;;
  esac
  url="postgres://runloom@127.0.0.1:$port/$db"
  fresh_db "$db"
  case "$kind" in
    runloom)
      TMPDIR="$dir" "$bin" bench --runs "$RUNS" --db "$url" --workers "$WORKERS" --json >"$out" 2>"$log" || {
        tail -n 20 "$log" >&2; die "runloom bench failed"; } ;;
    dbos)
      node "$HERE/dbos/workflows.mjs" --runs "$RUNS" --db "$url" --producers "$PRODUCERS" \
        --timeout-s "$TIMEOUT_S" >"$out" 2>"$log" || { tail -n 20 "$log" >&2; die "DBOS workflows failed"; } ;;
  esac
  drop_db "$db"
  # One JSON object, every run/workflow completed.
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

for ((pair = 1; pair <= PAIRS; pair++)); do
  for kind in runloom dbos; do
    printf 'pair %s/%s: %s, %s runs (load average %s)\n' "$pair" "$PAIRS" "$kind" "$RUNS" \
      "$(cut -d' ' -f1-3 /proc/loadavg)" >&2
    trial "$kind" "$pair" "$dir/$pair.$kind.json"
  done
done

# --- Table ------------------------------------------------------------------
node - "$dir" "$PAIRS" <<'EOF'
const fs = require('fs');
const [dir, pairs] = process.argv.slice(2);
const read = (p, kind) => {
  const lines = fs.readFileSync(`${dir}/${p}.${kind}.json`, 'utf8').trim().split('\n');
  return JSON.parse(lines[lines.length - 1]);
};
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const head = ['pair', 'runloom runs/s', 'dbos workflows/s', 'ratio', 'runloom MiB', 'dbos MiB'];
const rows = [], ratios = [];
for (let p = 1; p <= Number(pairs); p++) {
  const r = read(p, 'runloom'), d = read(p, 'dbos');
  const ratio = r.runs_per_s / d.workflows_per_s;
  ratios.push(ratio);
  rows.push([String(p), r.runs_per_s.toFixed(0), d.workflows_per_s.toFixed(0), ratio.toFixed(2) + 'x',
    r.peak_rss_mb == null ? '?' : r.peak_rss_mb.toFixed(1), d.peak_rss_mb.toFixed(1)]);
}
const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
const line = (cells) => cells.map((c, i) => c.padStart(widths[i])).join('  ');
console.log('');
console.log(line(head));
for (const r of rows) console.log(line(r));
console.log(`median ratio: ${median(ratios).toFixed(2)}x (issue 27 goal: at least 10x)`);
EOF
