#!/usr/bin/env bash
# The HTTP benchmarks of issue 10 (docs/performance.md, "The HTTP API"), one
# measurement per call:
#
#   bench/http/run.sh post [--duration 10s] [--connections 64] [--threads 2]
#                          [--http-threads 4] [--insecure-no-auth]
#   bench/http/run.sh sse  [--subscribers 1000]
#   bench/http/run.sh stream [--chunks 200] [--interval 10]
#
# Each call: a fresh SQLite database in a temp dir, an admin token (`runloom
# token create`), `runloom serve` on 127.0.0.1:PORT (`--no-executors` for
# post: creation alone), bench/http/noop3.yaml and sse_bench.yaml registered
# with POST /api/v1/workflows, then the load generator: wrk with
# bench/http/post_runs.lua (post), node bench/http/sse_fanout.mjs (sse),
# node bench/http/stream_latency.mjs (stream: a scripted streaming provider
# on PROVIDER_PORT, 18090, which `serve` reaches through a config file, and
# bench/http/stream_bench.yaml). The server is stopped with SIGTERM and the
# temp dir removed at the end.
#
# Installs what it needs and is missing (wrk, node) with
# `scripts/bootstrap.sh --bench` (apt-get, no prompts; nothing when present).
# Environment: RUNLOOM (the binary; default build/runloom), PORT (18080),
# SSE_FANOUT (the sse client script; default bench/http/sse_fanout.mjs).
set -euo pipefail

cd "$(dirname "$0")/../.."
readonly RUNLOOM="${RUNLOOM:-build/runloom}"
readonly PORT="${PORT:-18080}"
readonly URL="http://127.0.0.1:${PORT}"

die() { printf 'bench/http/run.sh: %s\n' "$*" >&2; exit 2; }

mode="${1:-}"
shift || true
duration=10s connections=64 wrk_threads=2 http_threads=4 subscribers=1000 no_auth=0
chunks=200 interval=10
readonly PROVIDER_PORT="${PROVIDER_PORT:-18090}"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --duration) duration="$2"; shift 2 ;;
    --connections) connections="$2"; shift 2 ;;
    --threads) wrk_threads="$2"; shift 2 ;;
    --http-threads) http_threads="$2"; shift 2 ;;
    --subscribers) subscribers="$2"; shift 2 ;;
    --insecure-no-auth) no_auth=1; shift ;;
    --chunks) chunks="$2"; shift 2 ;;
    --interval) interval="$2"; shift 2 ;;
    *) die "unknown argument '$1' (see the header of $0)" ;;
  esac
done
[[ $mode == post || $mode == sse || $mode == stream ]] ||
  die "say 'post', 'sse' or 'stream' (see the header of $0)"
[[ -x $RUNLOOM ]] || die "no binary at $RUNLOOM: build it (make cli) or set RUNLOOM"

bash scripts/bootstrap.sh --bench

dir="$(mktemp -d /tmp/runloom-bench-http.XXXXXX)"
server_pid=""
cleanup() {
  if [[ -n $server_pid ]]; then
    kill -TERM "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$dir"
}
trap cleanup EXIT

db="$dir/bench.db"
token="$("$RUNLOOM" token create --name bench --role admin --db "$db" 2>/dev/null)"
serve_flags=(--db "$db" --listen "127.0.0.1:${PORT}" --http-threads "$http_threads")
[[ $mode == post ]] && serve_flags+=(--no-executors)
[[ $no_auth == 1 ]] && serve_flags+=(--insecure-no-auth)
if [[ $mode == stream ]]; then
  printf 'providers:\n  scripted: {kind: openai, base_url: "http://127.0.0.1:%s/v1"}\nmodels:\n  streamer: {provider: scripted, model: scripted-1}\n' \
    "$PROVIDER_PORT" >"$dir/config.yaml"
  serve_flags+=(--config "$dir/config.yaml")
fi
"$RUNLOOM" serve "${serve_flags[@]}" 2>"$dir/serve.log" &
server_pid=$!
for _ in $(seq 100); do
  curl -fsS "$URL/readyz" >/dev/null 2>&1 && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$dir/serve.log" >&2; die "the server did not start"; }
  sleep 0.1
done

workflows=(bench/http/noop3.yaml bench/http/sse_bench.yaml)
[[ $mode == stream ]] && workflows+=(bench/http/stream_bench.yaml)
for wf in "${workflows[@]}"; do
  python3 -c 'import json, sys; print(json.dumps({"yaml": open(sys.argv[1]).read()}))' "$wf" |
    curl -fsS -o /dev/null -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
      --data-binary @- "$URL/api/v1/workflows"
done

if [[ $mode == post ]]; then
  RUNLOOM_TOKEN="$token" wrk "-t$wrk_threads" "-c$connections" "-d$duration" \
    -s bench/http/post_runs.lua "$URL"
elif [[ $mode == stream ]]; then
  node bench/http/stream_latency.mjs --url "$URL" --token "$token" --provider-port "$PROVIDER_PORT" \
    --chunks "$chunks" --interval "$interval"
else
  node "${SSE_FANOUT:-bench/http/sse_fanout.mjs}" --url "$URL" --token "$token" --pid "$server_pid" \
    --subscribers "$subscribers"
fi
