#!/usr/bin/env bash
# Makes an upgrade fixture (issue 25, "Upgrades from real older versions")
# with an OLDER runloom binary, built from a commit of this repository:
#
#   tests/upgrade/make_fixture.sh OLD_BINARY OUT_DIR [POSTGRES_URL]
#
# It writes, with OLD_BINARY only:
#   OUT_DIR/runloom.db      (SQLite) or OUT_DIR/runloom.sql (pg_dump of the
#                           PostgreSQL database at POSTGRES_URL, which must be
#                           empty and is left as it is)
#   OUT_DIR/runs.json       {"finished": ID, "paused": ID, "digest": DIGEST,
#                            "queued": ID, "expired": ID, "binary": "..."}
#   OUT_DIR/finished.json   OLD_BINARY's `status --json` of the finished run
# The runs: one finished (completed: a noop and an exec step), one paused
# at an approval gate, one queued (run --detach, never executed), and one
# running whose process was SIGKILLed in its second step, a 5 s sleep (its
# lease expires 30 s later, long before the fixture is opened again). The
# steps that run again after the upgrade are not exec steps: an exec step
# runs in the workflow file's directory, which the fixture does not keep.
#
# Nothing of today's binary or schema is used: that is the point. The
# fixtures are checked in (tests/upgrade/fixtures/<commit>-sqlite/ and
# <commit>-postgres/) and opened by today's binary in
# tests/integration/upgrade_test.cc (ctest -R Upgrade).
set -euo pipefail

die() { printf 'make_fixture: %s\n' "$*" >&2; exit 2; }
[[ $# == 2 || $# == 3 ]] || die "usage: $0 OLD_BINARY OUT_DIR [POSTGRES_URL]"
old="$1"
out="$2"
pg="${3:-}"
[[ -x "$old" ]] || die "$old is not an executable"
mkdir -p "$out"
[[ -e "$out/runs.json" ]] && die "$out already holds a fixture"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

if [[ -n "$pg" ]]; then
  db="$pg"
else
  db="$out/runloom.db"
fi

cat > "$work/done.yaml" <<'YAML'
name: up_done
steps:
  - id: a
    kind: noop
  - id: b
    kind: exec
    command: "echo '{\"n\": 1}'"
YAML
cat > "$work/gated.yaml" <<'YAML'
name: up_gated
steps:
  - id: draft
    kind: noop
  - id: review
    kind: approval
    proposal: {text: hello}
  - id: after
    kind: noop
YAML
cat > "$work/queued.yaml" <<'YAML'
name: up_queued
steps:
  - id: a
    kind: noop
YAML
cat > "$work/slow.yaml" <<'YAML'
name: up_slow
steps:
  - id: first
    kind: exec
    command: "echo '{\"first\": true}'"
  - id: second
    kind: sleep
    duration: 5s
YAML

run_id() { grep -oE 'r_[0-9a-z]{16,40}' "$1" | head -1; }

"$old" run "$work/done.yaml" --db "$db" < /dev/null > "$work/done.log" 2>&1
finished="$(run_id "$work/done.log")"
set +e
"$old" run "$work/gated.yaml" --db "$db" < /dev/null > "$work/gated.log" 2>&1
rc=$?
set -e
[[ $rc == 3 ]] || { cat "$work/gated.log"; die "the gated run did not pause (exit $rc)"; }
paused="$(run_id "$work/gated.log")"
digest="$(grep -oE 'sha256:[0-9a-f]{64}' "$work/gated.log" | head -1)"
"$old" run "$work/queued.yaml" --db "$db" --detach < /dev/null > "$work/queued.log" 2>&1
queued="$(run_id "$work/queued.log")"
"$old" run "$work/slow.yaml" --db "$db" < /dev/null > "$work/slow.log" 2>&1 &
slow_pid=$!
for _ in $(seq 1 100); do
  grep -q 'started.*second' "$work/slow.log" 2>/dev/null && break
  sleep 0.1
done
grep -q 'started.*second' "$work/slow.log" || { cat "$work/slow.log"; die "the slow run never reached its second step"; }
kill -9 "$slow_pid"
wait "$slow_pid" 2>/dev/null || true
expired="$(run_id "$work/slow.log")"

"$old" status "$finished" --db "$db" --json > "$out/finished.json"
for id in "$finished" "$paused" "$queued" "$expired"; do
  [[ -n "$id" ]] || die "a run id is missing (see the logs in $work)"
done
printf '{"binary": "%s", "finished": "%s", "paused": "%s", "digest": "%s", "queued": "%s", "expired": "%s"}\n' \
  "$(basename "$old")" "$finished" "$paused" "$digest" "$queued" "$expired" > "$out/runs.json"
if [[ -n "$pg" ]]; then
  # INSERTs, not COPY, and no psql meta-command (pg_dump 15.14 writes
  # \restrict lines): the test loads the dump through libpq in one script.
  pg_dump --no-owner --no-privileges --format=plain --inserts --dbname="$pg" |
    sed -e '/^\\restrict /d' -e '/^\\unrestrict /d' > "$out/runloom.sql"
fi
echo "make_fixture: $out: $(cat "$out/runs.json")"
