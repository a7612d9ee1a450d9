#!/usr/bin/env bash
# Usage: tests/npm_ci.sh DIR PACKAGE...
# Installs DIR's npm packages exactly as DIR/package-lock.json pins them
# (`npm ci`), unless every PACKAGE is installed already. Idempotent and
# non-interactive; a lock lets several build dirs run it at once. Needs node
# >= 20 and npm with access to the npm registry.
set -euo pipefail
cd "$1"
shift
installed() {
  # npm writes node_modules/.package-lock.json last, so a half-done install
  # (interrupted, failed) is not taken for a finished one.
  [[ -f node_modules/.package-lock.json ]] || return 1
  local p
  for p in "$@"; do
    [[ -f node_modules/$p/package.json ]] || return 1
  done
}
name="$(basename "$(pwd)")"
if installed "$@"; then
  echo "tests/$name: npm packages already installed"
  exit 0
fi
for tool in node npm; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "tests/npm_ci.sh: '$tool' not found; install Node.js 20+ (Debian: apt-get install nodejs npm)" >&2
    exit 1
  fi
done
exec 9>"${TMPDIR:-/tmp}/runloom-tests-npm-$(pwd | cksum | cut -d" " -f1).lock"
if command -v flock >/dev/null 2>&1; then
  flock 9
fi
if installed "$@"; then
  echo "tests/$name: npm packages already installed"
  exit 0
fi
rm -rf node_modules
npm ci --no-audit --no-fund --loglevel=error </dev/null
installed "$@" || { echo "tests/npm_ci.sh: npm ci finished but $* is missing in $(pwd)" >&2; exit 1; }
echo "tests/$name: npm packages installed"
