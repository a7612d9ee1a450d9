#!/usr/bin/env bash
# Grows an upgrade fixture (tests/upgrade/fixtures/<commit>-sqlite or
# -postgres) to N finished runs, to measure how long today's binary takes to
# migrate a large database of that older schema (docs/operations.md,
# "Upgrades"). Not run by CI.
#
#   tests/upgrade/bulk_runs.sh FIXTURE_DIR N OUT.db            (SQLite)
#   tests/upgrade/bulk_runs.sh FIXTURE_DIR N POSTGRES_URL      (PostgreSQL; an empty database)
#
# The rows are copies of the fixture's finished run (its runs row, events,
# step records and budget row if any), written by SQL in bulk with new ids
# r_bulk<16 digits>: no engine runs, and the old schema is kept exactly as the
# old binary left it (the fixture's own four runs stay too). Then time, e.g.:
#
#   time runloom status r_bulk0000000000000001 --db OUT.db > /dev/null    (the first open migrates)
set -euo pipefail

die() { printf 'bulk_runs: %s\n' "$*" >&2; exit 2; }
[[ $# == 3 ]] || die "usage: $0 FIXTURE_DIR N OUT.db|POSTGRES_URL"
fixture="$1"
n="$2"
out="$3"
[[ "$n" =~ ^[0-9]+$ ]] || die "N must be a number"
finished="$(grep -oE '"finished": "[^"]+"' "$fixture/runs.json" | cut -d'"' -f4)"
[[ -n "$finished" ]] || die "$fixture/runs.json names no finished run"

# The SELECT list of `table` with its run id column `col` replaced by the new
# id: `cols` is the table's column list in order.
select_list() {
  local cols="$1" col="$2" expr="$3" list="" c
  IFS=',' read -ra parts <<< "$cols"
  for c in "${parts[@]}"; do
    c="${c// /}"
    if [[ "$c" == "$col" ]]; then list+="${list:+, }$expr"; else list+="${list:+, }t.$c"; fi
  done
  printf '%s' "$list"
}

# run_id is the run's column in every table but runs (id).
tables=(runs run_events step_records budget_runs)

if [[ "$out" == postgres://* || "$out" == postgresql://* ]]; then
  [[ -f "$fixture/runloom.sql" ]] || die "$fixture has no runloom.sql"
  psql -q -v ON_ERROR_STOP=1 -d "$out" -f "$fixture/runloom.sql" > /dev/null
  sql="SET search_path TO runloom; BEGIN;"
  for t in "${tables[@]}"; do
    col=run_id
    [[ "$t" == runs ]] && col=id
    cols="$(psql -At -d "$out" -c "SELECT string_agg(column_name, ',' ORDER BY ordinal_position)
      FROM information_schema.columns WHERE table_schema = 'runloom' AND table_name = '$t'")"
    [[ -n "$cols" ]] || continue
    expr="'r_bulk' || lpad(g::text, 16, '0')"
    sql+=" INSERT INTO $t ($cols) SELECT $(select_list "$cols" "$col" "$expr")
      FROM $t t, generate_series(1, $n) g WHERE t.$col = '$finished';"
  done
  sql+=" COMMIT;"
  psql -q -v ON_ERROR_STOP=1 -d "$out" -c "$sql" -c "VACUUM ANALYZE" > /dev/null
  psql -At -d "$out" -c "SELECT count(*) FROM runloom.runs"
else
  [[ -f "$fixture/runloom.db" ]] || die "$fixture has no runloom.db"
  [[ -e "$out" ]] && die "$out exists"
  cp "$fixture/runloom.db" "$out"
  sql="PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF; BEGIN;
    CREATE TEMP TABLE g (i INTEGER PRIMARY KEY);
    WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < $n)
    INSERT INTO g SELECT i FROM s;"
  for t in "${tables[@]}"; do
    col=run_id
    [[ "$t" == runs ]] && col=id
    cols="$(sqlite3 "$out" "SELECT group_concat(name, ',') FROM pragma_table_info('$t')")"
    [[ -n "$cols" ]] || continue
    expr="'r_bulk' || printf('%016d', g.i)"
    # Run by run (the outer loop over g) so each table's primary key is
    # written in order.
    sql+=" INSERT INTO $t ($cols) SELECT $(select_list "$cols" "$col" "$expr")
      FROM g, $t t WHERE t.$col = '$finished' ORDER BY g.i;"
  done
  sql+=" COMMIT;"
  sqlite3 "$out" "$sql" > /dev/null
  # Back to the journal mode the old binary set (WAL), as it left the file.
  sqlite3 "$out" "PRAGMA journal_mode = WAL; SELECT count(*) FROM runs" | tail -1
fi
