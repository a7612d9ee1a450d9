#!/usr/bin/env bash
# check_links.sh BINARY: fails when BINARY loads PostgreSQL (libpq), Redis
# (hiredis), libcurl or Boost. The SQLite-only embedding test runs it on
# itself (tests/embedding/CMakeLists.txt).
set -euo pipefail
bin=$1
if [[ ! -x $bin ]]; then
  echo "check_links.sh: '$bin' is not an executable" >&2
  exit 2
fi
libs=$(ldd "$bin")
bad=$(grep -Ei 'libpq|hiredis|libcurl|boost' <<<"$libs" || true)
if [[ -n $bad ]]; then
  echo "$bin loads what an SQLite-only engine must not:" >&2
  echo "$bad" >&2
  exit 1
fi
echo "$bin: no libpq, hiredis, libcurl or Boost among its $(wc -l <<<"$libs") libraries"
