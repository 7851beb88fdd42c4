#!/usr/bin/env bash
# Installs the pinned npm packages the tests drive: the official TypeScript
# MCP SDK in test/mcpclient (mcp/tsclient_test.go). Node.js 20 or later must
# be on PATH (Debian 12's nodejs is 18, too old for the SDK); npm's cache
# lives under ~/.cache/hermes so a warm run installs offline in a second.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

command -v node >/dev/null 2>&1 || die "node not on PATH: the MCP client tests need Node.js 20 or later"
major="$(node --version | sed 's/^v//; s/\..*//')"
[ "$major" -ge 20 ] || die "node $(node --version) is older than 20"

cache="$HOME/.cache/hermes/npm"
mkdir -p "$cache"
cd "$HERMES_ROOT"
log "npm ci test/mcpclient"
npm ci --prefix test/mcpclient --no-audit --no-fund --prefer-offline --cache "$cache" >"$HERMES_CI_STATE_DIR/npm.log" 2>&1 ||
	{ tail -n 40 "$HERMES_CI_STATE_DIR/npm.log" >&2; die "npm ci failed"; }
log "installed: $(node -p 'require("./test/mcpclient/node_modules/@modelcontextprotocol/sdk/package.json").version' 2>/dev/null) of @modelcontextprotocol/sdk"
