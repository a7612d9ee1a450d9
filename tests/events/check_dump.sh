#!/usr/bin/env bash
# Runs events_dump (sample events from the real C++ factories) into a JSONL
# file, then validates that file against the schemas, requiring every type.
# usage: check_dump.sh <events_dump binary> <schemas_dir> <out.jsonl>
set -euo pipefail
if [[ $# -ne 3 ]]; then
  echo "usage: $0 <events_dump binary> <schemas_dir> <out.jsonl>" >&2
  exit 2
fi
dump=$1 schemas=$2 out=$3
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
"$dump" >"$out"
node "$here/validate.mjs" "$schemas" --require-all-types "$out"
