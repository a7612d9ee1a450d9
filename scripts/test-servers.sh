#!/usr/bin/env bash
# Starts and stops the servers the tests run against: a PostgreSQL 15 and a
# Redis, each on 127.0.0.1 with a free port, with its data in DIR. CTest runs
# `start` as the setup of the `servers` fixture and `stop` as its cleanup
# (cmake/RunloomHelpers.cmake); a test binary run by hand starts its own
# (src/testing/test_servers.cc).
#
#   scripts/test-servers.sh start DIR   start both; write DIR/postgres.url and DIR/redis.url
#   scripts/test-servers.sh stop DIR    stop both (idempotent), remove DIR
#
# PostgreSQL refuses to run as root: as root, DIR is given to the `postgres`
# user and the server runs as it (runuser). The test servers trade durability
# for speed (fsync off); they hold test data only. Redis runs with no
# persistence (no RDB, no AOF), as the chaos tests expect of a restart.
set -euo pipefail

die() { printf 'test-servers: %s\n' "$*" >&2; exit 1; }

[[ $# == 2 ]] || die "usage: $0 start|stop DIR"
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
  # Loopback only, its Unix socket in its own directory; enough connections
  # for the chaos tests' worker processes and their pools.
  as_pg "$PG_BIN/pg_ctl" -D "$pg/data" -l "$pg/server.log" -w -t 60 start -o \
    "-c listen_addresses=127.0.0.1 -p $pg_port -c unix_socket_directories=$pg \
     -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300 \
     -c shared_buffers=128MB" >/dev/null ||
    { cat "$pg/server.log" >&2; die "PostgreSQL did not start"; }
  echo "postgres://runloom@127.0.0.1:$pg_port/postgres" >"$dir/postgres.url"

  redis_port="$(free_port)"
  mkdir -p "$dir/redis"
  "$REDIS_SERVER" --bind 127.0.0.1 --port "$redis_port" --daemonize yes \
    --save '' --appendonly no --dir "$dir/redis" --pidfile "$dir/redis/redis.pid" \
    --logfile "$dir/redis/redis.log" || die "redis-server did not start"
  local i
  for i in $(seq 1 100); do
    if [[ -s "$dir/redis/redis.pid" ]] &&
      (exec 3<>"/dev/tcp/127.0.0.1/$redis_port") 2>/dev/null; then
      break
    fi
    sleep 0.05
  done
  echo "redis://127.0.0.1:$redis_port" >"$dir/redis.url"
  echo "test-servers: PostgreSQL on 127.0.0.1:$pg_port, Redis on 127.0.0.1:$redis_port ($dir)"
}

stop() {
  local pg=""
  [[ -f "$dir/pgdir" ]] && pg="$(cat "$dir/pgdir")"
  if [[ -n "$pg" && -f "$pg/data/postmaster.pid" ]]; then
    as_pg "$PG_BIN/pg_ctl" -D "$pg/data" -m immediate -w stop >/dev/null 2>&1 || true
  fi
  if [[ "$pg" == /tmp/runloom-pg.* ]]; then
    rm -rf "$pg"
  fi
  if [[ -s "$dir/redis/redis.pid" ]]; then
    kill "$(cat "$dir/redis/redis.pid")" 2>/dev/null || true
  fi
  rm -rf "$dir"
}

case "$cmd" in
  start) start ;;
  stop) stop ;;
  *) die "unknown command '$cmd'; use start or stop" ;;
esac
