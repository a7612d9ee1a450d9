#!/usr/bin/env bash
# Proves validate.mjs rejects what it must:
#  - every invalid/*.jsonl (each holds one kind of bad event) must fail, each
#    for the reason invalid/expected.tsv gives;
#  - a schema folder with a fixture removed, and one with a fixture that has no
#    schema, must fail.
# usage: check_invalid.sh <schemas_dir>
set -euo pipefail
if [[ $# -ne 1 ]]; then
  echo "usage: $0 <schemas_dir>" >&2
  exit 2
fi
schemas=$1
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cases=0 bad=0

# run_validate <args...>: sets $out and $rc.
run_validate() {
  set +e
  out="$(node "$here/validate.mjs" "$@" 2>&1)"
  rc=$?
  set -e
}

# expect_fail_line <case name> <FAIL-line prefix> <text the line must contain>
expect_fail_line() {
  local name=$1 prefix=$2 text=$3
  cases=$((cases + 1))
  if grep -F -- "FAIL $prefix" <<<"$out" | grep -qF -- "$text"; then
    echo "rejected as expected: $name"
  else
    echo "NOT REJECTED FOR ITS REASON: $name: want a line 'FAIL $prefix...' containing: $text"
    bad=$((bad + 1))
  fi
}

shopt -s nullglob
files=("$here"/invalid/*.jsonl)
if [[ ${#files[@]} -eq 0 ]]; then
  echo "no cases in $here/invalid" >&2
  exit 1
fi
run_validate "$schemas" "${files[@]}"
if [[ $rc -ne 1 ]]; then
  echo "validate.mjs exited $rc on the invalid cases, want 1"
  bad=$((bad + 1))
fi
declare -A reason=()
while IFS=$'\t' read -r file text; do
  [[ -z "$file" || "$file" == \#* ]] && continue
  reason[$file]=$text
done <"$here/invalid/expected.tsv"
for f in "${files[@]}"; do
  name="$(basename "$f")"
  if [[ -z "${reason[$name]:-}" ]]; then
    echo "invalid/$name has no row in invalid/expected.tsv"
    bad=$((bad + 1))
    continue
  fi
  expect_fail_line "$name" "$f" "${reason[$name]}"
done
for name in "${!reason[@]}"; do
  if [[ ! -f "$here/invalid/$name" ]]; then
    echo "invalid/expected.tsv names a missing case: $name"
    bad=$((bad + 1))
  fi
done

tmp="$(mktemp -d "${TMPDIR:-/tmp}/runloom-events-check.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
cp -r "$schemas" "$tmp/no_fixture"
rm "$tmp/no_fixture/fixtures/step.reused.json"
run_validate "$tmp/no_fixture"
expect_fail_line "schema without fixture" "$tmp/no_fixture/fixtures/step.reused.json" "missing"
cp -r "$schemas" "$tmp/stray_fixture"
echo '{}' >"$tmp/stray_fixture/fixtures/run.exploded.json"
run_validate "$tmp/stray_fixture"
expect_fail_line "fixture without schema" "$tmp/stray_fixture/fixtures/run.exploded.json" \
  "fixture without a schema"

if [[ $bad -ne 0 ]]; then
  echo "--- validate.mjs output of the last run:"
  echo "$out"
fi
echo "$((cases - bad)) passed, $bad failed"
[[ $bad -eq 0 ]]
