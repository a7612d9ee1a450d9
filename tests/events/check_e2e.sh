#!/usr/bin/env bash
# Runs the three examples end to end with the real binary (ingest: a retried
# parser and a failing chunk; blog: two approvals and a revision; triage: a
# deadline and a rejection), dumps every event of every run as JSONL, and
# validates all of them against the schemas.
# usage: check_e2e.sh <runloom binary> <source dir> <schemas_dir> <work dir>
set -euo pipefail
if [[ $# -ne 4 ]]; then
  echo "usage: $0 <runloom binary> <source dir> <schemas_dir> <work dir>" >&2
  exit 2
fi
bin=$1 src=$2 schemas=$3 work=$4
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
rm -rf "$work" && mkdir -p "$work"
db="$work/e2e.db"
ids=()
run() {  # run ARGS...: runs `runloom run`, remembers the run id
  local out rc=0
  out=$("$bin" run "$@" --db "$db" </dev/null 2>&1) || rc=$?
  local id
  id=$(grep -o 'run r_[0-9a-z]*' <<<"$out" | head -1 | cut -d' ' -f2)
  [[ -n "$id" ]] || { echo "no run id in: $out" >&2; exit 1; }
  ids+=("$id")
  echo "$id $rc"
}
run "$src/examples/ingest.yaml" --input document_id=e2e-1 --input format=csv --input fail_parse_times=1 >/dev/null
run "$src/examples/ingest.yaml" --input document_id=e2e-2 --input fail_chunk=true >/dev/null
run "$src/examples/blog.yaml" --auto-approve >/dev/null
read -r blog rc < <(run "$src/examples/blog.yaml")
[[ "$rc" == 3 ]] || { echo "blog run did not pause (exit $rc)" >&2; exit 1; }
digest() { "$bin" status "$1" --db "$db" --json | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).pending_gate.proposal_digest))'; }
"$bin" decide "$blog" --db "$db" --digest "$(digest "$blog")" --approve >/dev/null
"$bin" worker --db "$db" --until-idle 2>/dev/null
"$bin" decide "$blog" --db "$db" --digest "$(digest "$blog")" --revise "tighter intro" >/dev/null
"$bin" worker --db "$db" --until-idle 2>/dev/null
"$bin" decide "$blog" --db "$db" --digest "$(digest "$blog")" --approve >/dev/null
"$bin" worker --db "$db" --until-idle 2>/dev/null
read -r triage rc < <(run "$src/examples/triage.yaml")
"$bin" decide "$triage" --db "$db" --digest "$(digest "$triage")" --reject >/dev/null
"$bin" worker --db "$db" --until-idle 2>/dev/null
"$bin" cancel "$("$bin" run "$src/examples/blog.yaml" --db "$db" </dev/null 2>&1 | grep -o 'run r_[0-9a-z]*' | head -1 | cut -d' ' -f2)" --db "$db" >/dev/null
: >"$work/events.jsonl"
for id in $("$bin" status "${ids[0]}" --db "$db" --json >/dev/null && sqlite3 "$db" 'SELECT id FROM runs'); do
  "$bin" events "$id" --db "$db" --json >>"$work/events.jsonl"
done
echo "$(wc -l <"$work/events.jsonl") events from $(sqlite3 "$db" 'SELECT count(*) FROM runs') runs"
node "$here/validate.mjs" "$schemas" "$work/events.jsonl"
