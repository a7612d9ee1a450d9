-- wrk script: run creation over HTTP keep-alive (issue 10 benchmark).
--   wrk -t2 -c64 -d10s -s bench/http/post_runs.lua http://127.0.0.1:8080
-- Needs RUNLOOM_TOKEN in the environment (an operator token) and a workflow
-- named by RUNLOOM_BENCH_WORKFLOW (default "noop3") registered on the server.
-- bench/http/run.sh post sets all this up.
local token = os.getenv("RUNLOOM_TOKEN") or ""
local workflow = os.getenv("RUNLOOM_BENCH_WORKFLOW") or "noop3"
-- RUNLOOM_BENCH_VERSION pins a version (the default asks for the latest).
local version = os.getenv("RUNLOOM_BENCH_VERSION")
wrk.method = "POST"
wrk.path = "/api/v1/runs"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer " .. token
if version then
  wrk.body = '{"workflow":"' .. workflow .. '","version":' .. version .. ',"inputs":{}}'
else
  wrk.body = '{"workflow":"' .. workflow .. '","inputs":{}}'
end

-- wrk prints "Non-2xx or 3xx responses: N" when any request was refused;
-- a valid measurement has none.
