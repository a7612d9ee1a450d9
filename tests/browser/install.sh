#!/usr/bin/env bash
# Installs the npm packages ui_test.mjs needs (playwright-core) into
# tests/browser/node_modules, exactly as package-lock.json pins them.
# Idempotent and non-interactive (tests/npm_ci.sh).
set -euo pipefail
exec bash "$(dirname "${BASH_SOURCE[0]}")/../npm_ci.sh" "$(dirname "${BASH_SOURCE[0]}")" playwright-core
