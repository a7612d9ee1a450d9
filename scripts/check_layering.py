#!/usr/bin/env python3
"""The module layering, checked over #includes (issue 20).

Every production file of src/ and include/runloom/ belongs to one unit (the
first rule of UNITS that matches its path). A file may include a header of
its own unit or of a unit ALLOWED lists for it; any other runloom header is
an edge the table does not have, and fails the check with the file, the line
and how to fix it. Some third-party headers (the network and database
libraries) belong to the one unit that may use them (THIRD_PARTY).

Tests (*_test.cc, *_test_util.h, test_client.h, src/testing/, the simulator
src/sim/, tests/) sit above everything and are not checked.

The CLI, the HTTP API and the MCP server also never call Engine::store() or transport()
(AROUND_THE_ENGINE): they go through the engine's operations.

Run: python3 scripts/check_layering.py [SOURCE_DIR]   (ctest: layering)
A new edge that is meant: add it to ALLOWED, in the same commit, with the
reason in the commit message. A new unit: a rule in UNITS and a row here.
"""
import os
import re
import sys

# (path prefix, unit): first match wins, so the narrower prefixes come first.
UNITS = [
    ("include/runloom/event_bus.h", "events"),
    ("include/runloom/events.h", "events"),
    # The configuration file for embedders (runloom::providers).
    ("include/runloom/config.h", "providers"),
    # The HTTP server for embedders (runloom::api).
    ("include/runloom/http_server.h", "api"),
    ("include/runloom/live_text.h", "events"),
    ("include/runloom/workflow.h", "workflow"),
    ("include/runloom/store.h", "store"),
    ("include/runloom/transport.h", "transport"),
    # The step API (StepKind, StepContext); the registry behind it is in steps.
    ("include/runloom/step.h", "step_api"),
    ("include/runloom/backend.h", "backend"),
    # Each SQL store's options and opener (the opener composed in src/backend/).
    ("include/runloom/sqlite.h", "store_sqlite"),
    ("include/runloom/postgres.h", "store_postgres"),
    # The engine's public API: option and value types, the Engine class.
    ("include/runloom/engine.h", "engine_api"),
    ("include/runloom/gate.h", "engine_rules"),
    ("include/runloom/", "core"),
    ("src/core/", "core"),
    ("src/net/", "net"),
    ("src/schedule/", "schedule"),
    ("src/workflow/", "workflow"),
    ("src/redis/", "redis"),
    ("src/events/", "events"),
    ("src/llm/http_provider", "llm_http"),
    ("src/llm/configured_registry", "llm_http"),
    ("src/llm/internal/", "llm_http"),
    ("src/llm/redis_cap_board", "llm_redis"),
    ("src/llm/", "llm"),
    ("src/store/", "store"),
    ("src/transport/redis/", "redis_transport"),
    ("src/transport/", "transport"),
    ("src/backend/builtin_backends", "backends"),
    ("src/backend/", "backend"),
    ("src/steps/http_", "steps_http"),
    ("src/steps/builtin_registry", "steps_http"),
    ("src/steps/", "steps"),
    ("src/engine/rules/", "engine_rules"),
    ("src/engine/observe/", "engine_observe"),
    ("src/engine/run/", "engine_run"),
    ("src/engine/service/", "engine_service"),
    ("src/engine/", "engine"),
    ("src/providers/", "providers"),
    ("src/auth/", "auth"),
    ("src/wire/", "wire"),
    ("src/web/", "web"),
    ("src/api/", "api"),
    ("src/mcp/", "mcp"),
    ("src/cli/", "cli"),
]

# unit -> the units its files may include (besides its own). Read as "may
# depend on"; the table has no cycles, and a unit lower down never names one
# above it.
CORE = {"core"}
# The step API sits just above core: whatever runs or is run by a step uses it.
STEP = CORE | {"step_api"}
ALLOWED = {
    "core": set(),
    "net": CORE,  # runloom::Mutex (otlp_exporter.h)
    # Cron expressions and fire times in a time zone: pure, no store (issue 23).
    "schedule": CORE,
    # A workflow's `schedules:` are checked with the schedule module's parser.
    "workflow": CORE | {"schedule"},
    "redis": CORE,
    "events": CORE | {"workflow"},
    "step_api": CORE,
    "llm": STEP | {"workflow"},
    "llm_http": STEP | {"workflow", "llm", "net"},
    "llm_redis": CORE | {"llm", "redis"},
    "transport": CORE,
    # schedule: a schedule row's id and policies are checked as everywhere else.
    "store": CORE | {"events", "transport", "workflow", "schedule"},
    # backend: the Backend value a store's opener returns (runloom/backend.h).
    "store_sqlite": CORE | {"store", "events", "transport", "workflow", "backend"},
    "store_postgres": CORE | {"store", "events", "transport", "workflow", "backend"},
    "redis_transport": CORE | {"transport", "redis"},
    "backend": CORE | {"store", "events", "transport"},
    "backend_sqlite": CORE | {"backend", "store", "store_sqlite", "events", "transport"},
    "backend_postgres": CORE | {"backend", "store", "store_postgres", "events", "transport",
                                "redis_transport", "redis", "llm", "llm_redis"},
    "backends": CORE | {"backend", "backend_sqlite", "backend_postgres"},
    "steps": STEP | {"workflow", "llm", "events", "store"},
    "steps_http": STEP | {"workflow", "llm", "events", "steps", "net", "store"},
    # The pure rules: no store, transport, backend or network.
    "engine_rules": STEP | {"workflow", "events"},
    # The public API header; the layers below the facade use its value types.
    "engine_api": STEP | {"workflow", "events", "store", "transport", "backend", "engine_rules"},
    # What the engine reports: metrics, stage events and spans (a run's
    # trace is read from its context: engine_rules).
    "engine_observe": STEP | {"workflow", "events", "store", "engine_rules"},
    # One run's execution.
    "engine_run": STEP | {"workflow", "events", "steps", "llm", "store", "transport",
                          "engine_rules", "engine_observe"},
    # The process-wide services (executor pool, lease keeper, sweeper, ...).
    "engine_service": STEP | {"workflow", "events", "steps", "llm", "store", "transport",
                              "backend", "engine_api", "engine_rules", "engine_observe",
                              "engine_run"},
    # The facade: Engine, admission, decisions, the read model.
    "engine": STEP | {"workflow", "events", "steps", "llm", "store", "transport", "backend",
                      "engine_api", "engine_rules", "engine_observe", "engine_run", "engine_service",
                      "schedule"},
    # The configuration file: the HTTP providers and the step kinds wired
    # into an engine's options, secrets resolved by the engine's lookup.
    "providers": STEP | {"workflow", "llm", "llm_http", "steps", "steps_http", "engine_api",
                         "engine_run"},
    "auth": CORE | {"store", "events"},
    "wire": STEP | {"workflow", "events", "store", "engine", "engine_api", "engine_rules"},
    # The UI vocabulary is generated from the engine's tables (gate.h decisions).
    "web": CORE | {"events", "workflow", "engine_rules"},
    "api": STEP | {"workflow", "events", "store", "backend", "engine", "engine_api",
                   "engine_rules", "auth", "schedule",
                   "wire", "web", "steps"},
    # `runloom mcp`: the engine's operations as MCP tools, with the API's roles
    # (auth) and refusals (wire); it knows nothing of HTTP.
    "mcp": STEP | {"workflow", "events", "store", "backend", "engine", "engine_api",
                   "engine_rules", "auth", "wire"},
    "cli": set(),  # the top: filled below with every unit
}
ALLOWED["cli"] = set(ALLOWED) - {"cli"}

# Third-party headers (the first path component, or the file) -> the units
# that may include them.
THIRD_PARTY = {
    "curl": {"net"},
    "hiredis": {"redis"},
    "libpq-fe.h": {"store_postgres"},
    "sqlite3.h": {"store_sqlite"},
    "boost": {"api"},
}

INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')

# The units that serve users go through the engine's operations, never
# around it to the backend's parts (issue 20: "the CLI goes through the
# engine"). Engine::store() and Engine::transport() are for tests and tools.
AROUND_THE_ENGINE = re.compile(r"(->|\.)(store|transport)\(\)")
THROUGH_THE_ENGINE = {"cli", "api", "mcp"}


# A backend's own folder and composition file need no row of their own:
# src/store/<name>/ is store_<name>, src/backend/<name>_backend.cc is
# backend_<name>, each allowed what the SQL stores and their compositions are
# (a new backend touches only src/backend/ and its folder).
STORE_FOLDER = re.compile(r"^src/store/([a-z0-9]+)/")
BACKEND_FILE = re.compile(r"^src/backend/([a-z0-9]+)_backend\.(h|cc)$")


def unit_of(path):
    m = STORE_FOLDER.match(path)
    if m and m.group(1) != "internal":
        return "store_" + m.group(1)
    m = BACKEND_FILE.match(path)
    if m:
        return "backend_" + m.group(1)
    for prefix, unit in UNITS:
        if path.startswith(prefix):
            return unit
    return None


def allowed_of(unit):
    if unit in ALLOWED:
        return ALLOWED[unit]
    if unit.startswith("store_"):
        return ALLOWED["store_sqlite"]
    if unit.startswith("backend_"):
        return ALLOWED["backend_postgres"] | {"store_" + unit[len("backend_"):]}
    raise KeyError(unit)


def is_test(path):
    name = os.path.basename(path)
    return (name.endswith("_test.cc") or "test_util" in name or name == "test_client.h"
            or path.startswith("src/testing/") or path.startswith("src/sim/")
            or path.startswith("tests/"))


def header_unit(inc, root):
    """The unit of a runloom header named by an #include, or None."""
    for base in ("src", "include"):
        if os.path.isfile(os.path.join(root, base, inc)):
            return unit_of(f"{base}/{inc}")
    return None


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    problems = []
    files = 0
    for top in ("src", "include/runloom"):
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            for name in sorted(names):
                if not name.endswith((".h", ".cc")):
                    continue
                path = os.path.relpath(os.path.join(dirpath, name), root)
                if is_test(path):
                    continue
                unit = unit_of(path)
                if unit is None:
                    problems.append(f"{path}: in no unit of scripts/check_layering.py (UNITS): "
                                    "add a rule for its folder")
                    continue
                files += 1
                allowed = allowed_of(unit)
                with open(os.path.join(root, path), encoding="utf-8") as f:
                    for lineno, line in enumerate(f, 1):
                        if unit in THROUGH_THE_ENGINE and AROUND_THE_ENGINE.search(line):
                            problems.append(
                                f"{path}:{lineno}: reaches around the engine to its backend "
                                "(Engine::store() / transport() are for tests and tools): call "
                                "an Engine operation, or add one to runloom/engine.h")
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        inc = m.group(2)
                        first = inc.split("/")[0]
                        owners = THIRD_PARTY.get(first) or THIRD_PARTY.get(inc)
                        if owners is not None:
                            if unit not in owners:
                                problems.append(
                                    f"{path}:{lineno}: includes <{inc}>, which only "
                                    f"{', '.join(sorted(owners))} may use; {unit} must reach it "
                                    "through that unit's interface")
                            continue
                        if m.group(1) != '"':
                            continue
                        dep = header_unit(inc, root)
                        if dep is None or dep == unit or dep in allowed:
                            continue
                        problems.append(
                            f"{path}:{lineno}: includes \"{inc}\" ({dep}), but {unit} may "
                            f"depend only on {', '.join(sorted(allowed)) or 'nothing'}: move the "
                            f"code, invert the dependency, or add {unit} -> {dep} to ALLOWED in "
                            "scripts/check_layering.py if the edge is meant")
    for p in problems:
        print(p)
    if problems:
        print(f"layering: {len(problems)} include(s) against the table, in {files} files")
        return 1
    print(f"layering: {files} files, every include within the table")
    return 0


if __name__ == "__main__":
    sys.exit(main())
