#!/usr/bin/env bash
# The README's two set-up commands, for a fresh Debian 12 machine where even
# `make` may be missing:
#   bash scripts/setup.sh demo   # install what is missing, build, run the blog pipeline
#   bash scripts/setup.sh test   # install what is missing (test packages too), build, run all tests
# It installs the missing Debian packages (scripts/bootstrap.sh: idempotent,
# non-interactive), then runs `make demo` or `make test`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
case "${1:-}" in
  demo) bash scripts/bootstrap.sh </dev/null; exec make demo ;;
  test) bash scripts/bootstrap.sh --test </dev/null; exec make test </dev/null ;;
  *) echo "usage: bash scripts/setup.sh demo|test" >&2; exit 2 ;;
esac
