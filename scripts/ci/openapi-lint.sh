#!/usr/bin/env bash
# Lints docs/openapi.yaml with the pinned @redocly/cli of test/openapi
# (installed by scripts/ci/npm-tools.sh), under redocly.yaml at the
# repository root: the recommended rules, every one an error, so a warning
# fails CI too. No telemetry, no update check: CI reaches no service for it.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

cd "$HERMES_ROOT"
cli=test/openapi/node_modules/@redocly/cli/bin/cli.js
[ -f "$cli" ] || die "$cli missing: run scripts/ci/npm-tools.sh (npm ci --prefix test/openapi)"
log "redocly $(node -p 'require("./test/openapi/node_modules/@redocly/cli/package.json").version') lint docs/openapi.yaml"
REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true \
	node "$cli" lint --config redocly.yaml --format stylish docs/openapi.yaml
