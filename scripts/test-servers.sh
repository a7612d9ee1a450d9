#!/usr/bin/env bash
# Starts and stops the servers the tests run against: a PostgreSQL 15 and a
# Redis, each on 127.0.0.1 with a free port, with its data in DIR. CTest runs
# `start` as the setup of the `servers` fixture and `stop` as its cleanup
# (cmake/RunloomHelpers.cmake); a test binary run by hand starts its own
# (src/testing/test_servers.cc).
#
#   scripts/test-servers.sh start DIR             start both; write DIR/postgres.url and DIR/redis.url
#   scripts/test-servers.sh stop DIR              stop both (idempotent), remove DIR
#   scripts/test-servers.sh restart-postgres DIR  crash PostgreSQL (stop -m immediate) and start it
#                                                 again: same port, same data directory
#   scripts/test-servers.sh restart-redis DIR     SIGKILL Redis and start it again on the same
#                                                 port, empty (no persistence: every key is lost)
#
# The restarts are for the chaos tests that start their own pair (a test
# must not restart the `servers` fixture's pair: other tests share it).
#
# PostgreSQL refuses to run as root: as root, DIR is given to the `postgres`
# user and the server runs as it (runuser). The test servers trade durability
# for speed (fsync off: an OS crash may lose data); they hold test data only.
# synchronous_commit stays on, so a server crash (restart-postgres) never
# loses a commit it acknowledged: with it off, a crash drops the last
# commits, and a worker that saw them succeed would go on from state the
# database no longer has. Without fsync a commit only waits for a write(2).
# Redis runs with no persistence (no RDB, no AOF), as the chaos tests expect
# of a restart.
set -euo pipefail

die() { printf 'test-servers: %s\n' "$*" >&2; exit 1; }

[[ $# == 2 ]] || die "usage: $0 start|stop|restart-postgres|restart-redis DIR"
cmd="$1"
dir="$2"
PG_BIN="${RUNLOOM_PG_BIN:-/usr/lib/postgresql/15/bin}"
REDIS_SERVER="${RUNLOOM_REDIS_SERVER:-redis-server}"

as_pg() {
  if [[ $(id -u) == 0 ]]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# start_postgres PGDIR PORT: the server of PGDIR/data on 127.0.0.1:PORT.
start_postgres() {
  local pg="$1" port="$2"
  # Loopback only, its Unix socket in its own directory; enough connections
  # for the chaos tests' worker processes and their pools.
  as_pg "$PG_BIN/pg_ctl" -D "$pg/data" -l "$pg/server.log" -w -t 60 start -o \
    "-c listen_addresses=127.0.0.1 -p $port -c unix_socket_directories=$pg \
     -c fsync=off -c synchronous_commit=on -c full_page_writes=off -c max_connections=300 \
     -c shared_buffers=128MB" >/dev/null ||
    { cat "$pg/server.log" >&2; die "PostgreSQL did not start"; }
}

# start_redis PORT: a Redis with no persistence on 127.0.0.1:PORT, data in
# DIR/redis; returns once it accepts connections.
start_redis() {
  local port="$1"
  rm -f "$dir/redis/redis.pid"
  "$REDIS_SERVER" --bind 127.0.0.1 --port "$port" --daemonize yes \
    --save '' --appendonly no --dir "$dir/redis" --pidfile "$dir/redis/redis.pid" \
    --logfile "$dir/redis/redis.log" || die "redis-server did not start"
  local i
  for i in $(seq 1 100); do
    if [[ -s "$dir/redis/redis.pid" ]] &&
      (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      return 0
    fi
    sleep 0.05
  done
  die "Redis did not accept connections on 127.0.0.1:$port"
}

start() {
  [[ -x "$PG_BIN/initdb" ]] || die "no PostgreSQL at $PG_BIN (install postgresql-15: bash scripts/bootstrap.sh --test)"
  command -v "$REDIS_SERVER" >/dev/null || die "no $REDIS_SERVER (install redis-server: bash scripts/bootstrap.sh --test)"
  rm -rf "$dir"
  mkdir -p "$dir"
  # The data directory lives under /tmp, not DIR: as root the server runs as
  # `postgres`, which may not be able to reach DIR's parents.
  local pg pg_port redis_port
  pg="$(mktemp -d /tmp/runloom-pg.XXXXXX)"
  echo "$pg" >"$dir/pgdir"
  if [[ $(id -u) == 0 ]]; then
    chown postgres: "$pg"
  fi
  chmod 700 "$pg"
  pg_port="$(free_port)"
  as_pg "$PG_BIN/initdb" -D "$pg/data" -U runloom --auth=trust -E UTF8 --no-sync \
    >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; die "initdb failed"; }
  start_postgres "$pg" "$pg_port"
  echo "$pg_port" >"$dir/postgres.port"
  echo "postgres://runloom@127.0.0.1:$pg_port/postgres" >"$dir/postgres.url"

  redis_port="$(free_port)"
  mkdir -p "$dir/redis"
  start_redis "$redis_port"
  echo "$redis_port" >"$dir/redis.port"
  echo "redis://127.0.0.1:$redis_port" >"$dir/redis.url"
  echo "test-servers: PostgreSQL on 127.0.0.1:$pg_port, Redis on 127.0.0.1:$redis_port ($dir)"
}

stop() {
  local pg=""
  [[ -f "$dir/pgdir" ]] && pg="$(cat "$dir/pgdir")"
  # Redis first: it stops at once, so a slow PostgreSQL stop below (a loaded
  # machine) never leaves it running.
  if [[ -s "$dir/redis/redis.pid" ]]; then
    kill "$(cat "$dir/redis/redis.pid")" 2>/dev/null || true
  fi
  if [[ -n "$pg" && -f "$pg/data/postmaster.pid" ]]; then
    # Bounded well inside CTest's timeout for this step; a postmaster still
    # there after it is killed outright (its data is thrown away below).
    if ! as_pg "$PG_BIN/pg_ctl" -D "$pg/data" -m immediate -w -t 20 stop >/dev/null 2>&1; then
      local pid
      pid="$(head -n 1 "$pg/data/postmaster.pid" 2>/dev/null || true)"
      [[ "$pid" =~ ^[0-9]+$ ]] && kill -KILL "$pid" 2>/dev/null || true
    fi
  fi
  if [[ "$pg" == /tmp/runloom-pg.* ]]; then
    rm -rf "$pg"
  fi
  rm -rf "$dir"
}

# A crash, not a shutdown: in-flight transactions are lost and clients see
# their connections reset; the restarted server recovers from its WAL.
restart_postgres() {
  [[ -f "$dir/pgdir" && -f "$dir/postgres.port" ]] || die "no PostgreSQL started in $dir"
  local pg
  pg="$(cat "$dir/pgdir")"
  as_pg "$PG_BIN/pg_ctl" -D "$pg/data" -m immediate -w stop >/dev/null ||
    die "PostgreSQL did not stop"
  start_postgres "$pg" "$(cat "$dir/postgres.port")"
}

restart_redis() {
  [[ -s "$dir/redis/redis.pid" && -f "$dir/redis.port" ]] || die "no Redis started in $dir"
  local pid i
  pid="$(cat "$dir/redis/redis.pid")"
  kill -KILL "$pid" 2>/dev/null || true
  # Gone (and its port free) before the new one binds it.
  for i in $(seq 1 100); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  start_redis "$(cat "$dir/redis.port")"
}

case "$cmd" in
  start) start ;;
  stop) stop ;;
  restart-postgres) restart_postgres ;;
  restart-redis) restart_redis ;;
  *) die "unknown command '$cmd'; use start, stop, restart-postgres or restart-redis" ;;
esac
