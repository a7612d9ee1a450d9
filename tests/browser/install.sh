#!/usr/bin/env bash
# Installs the npm packages ui_test.mjs needs (playwright-core) into
# tests/browser/node_modules, exactly as package-lock.json pins them.
# Idempotent and non-interactive: does nothing when they are installed already.
# Needs node >= 20 and npm with access to the npm registry.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

installed() {
  # npm writes node_modules/.package-lock.json last, so a half-done install
  # (interrupted, failed) is not taken for a finished one.
  [[ -f node_modules/.package-lock.json &&
     -f node_modules/playwright-core/package.json ]]
}

if installed; then
  echo "tests/browser: npm packages already installed"
  exit 0
fi
for tool in node npm; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "tests/browser/install.sh: '$tool' not found; install Node.js 20+ (Debian: apt-get install nodejs npm)" >&2
    exit 1
  fi
done
# Several build dirs may run this at once; take a lock so one installs and the
# others then find the result.
exec 9>"${TMPDIR:-/tmp}/runloom-tests-browser-npm-$(pwd | cksum | cut -d" " -f1).lock"
if command -v flock >/dev/null 2>&1; then
  flock 9
fi
if installed; then
  echo "tests/browser: npm packages already installed"
  exit 0
fi
rm -rf node_modules
npm ci --no-audit --no-fund --loglevel=error </dev/null
installed || { echo "tests/browser/install.sh: npm ci finished but playwright-core is missing" >&2; exit 1; }
echo "tests/browser: npm packages installed"
