#!/usr/bin/env bash
# Installs the npm packages mcp_test.mjs needs (@modelcontextprotocol/sdk)
# into tests/mcp/node_modules, exactly as package-lock.json pins them.
# Idempotent and non-interactive (tests/npm_ci.sh).
set -euo pipefail
exec bash "$(dirname "${BASH_SOURCE[0]}")/../npm_ci.sh" "$(dirname "${BASH_SOURCE[0]}")" @modelcontextprotocol/sdk
