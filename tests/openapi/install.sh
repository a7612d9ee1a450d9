#!/usr/bin/env bash
# Installs the npm package validate.mjs needs (@seriousme/openapi-schema-validator)
# into tests/openapi/node_modules, exactly as package-lock.json pins it.
# Idempotent and non-interactive (tests/npm_ci.sh).
set -euo pipefail
exec bash "$(dirname "${BASH_SOURCE[0]}")/../npm_ci.sh" "$(dirname "${BASH_SOURCE[0]}")" \
  @seriousme/openapi-schema-validator
