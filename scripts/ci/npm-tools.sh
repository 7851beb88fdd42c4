#!/usr/bin/env bash
# Installs the pinned npm packages the tests and CI drive: the official
# TypeScript MCP SDK in test/mcpclient (mcp/tsclient_test.go), the OpenAPI
# linter @redocly/cli in test/openapi (scripts/ci/openapi-lint.sh,
# server/openapi_test.go) and the real agent hosts, Claude Code and Codex, in
# test/agenthosts (test/agenthosts/*_test.go; native binaries, so their
# engines field does not bind the node that installs them). Node.js 20.19 or
# later must be on PATH (Debian 12's nodejs is 18, too old for the first
# two); npm's cache lives under ~/.cache/hermes so a warm run installs
# offline in seconds.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

command -v node >/dev/null 2>&1 || die "node not on PATH: the MCP client tests and the OpenAPI lint need Node.js 20.19 or later"
major="$(node --version | sed 's/^v//; s/\..*//')"
minor="$(node --version | sed 's/^v[0-9]*\.//; s/\..*//')"
[ "$major" -gt 20 ] || { [ "$major" -eq 20 ] && [ "$minor" -ge 19 ]; } || die "node $(node --version) is older than 20.19"

cache="$HOME/.cache/hermes/npm"
mkdir -p "$cache"
cd "$HERMES_ROOT"
for dir in test/mcpclient test/openapi test/agenthosts; do
	log "npm ci $dir"
	npm ci --prefix "$dir" --no-audit --no-fund --prefer-offline --cache "$cache" >"$HERMES_CI_STATE_DIR/npm.log" 2>&1 ||
		{ tail -n 40 "$HERMES_CI_STATE_DIR/npm.log" >&2; die "npm ci $dir failed"; }
done
# Claude Code's package holds a placeholder where its native binary goes; its
# postinstall copies the binary over it from the platform package. An npm
# that skips install scripts leaves the placeholder: copy it here.
claude=test/agenthosts/node_modules/@anthropic-ai/claude-code
if ! head -c 4 "$claude/bin/claude.exe" 2>/dev/null | cmp -s - <(printf '\177ELF'); then
	log "node $claude/install.cjs (the native binary was missing)"
	(cd "$claude" && node install.cjs) >"$HERMES_CI_STATE_DIR/npm.log" 2>&1 ||
		{ tail -n 40 "$HERMES_CI_STATE_DIR/npm.log" >&2; die "Claude Code's install.cjs failed"; }
fi
log "installed: $(node -p 'require("./test/mcpclient/node_modules/@modelcontextprotocol/sdk/package.json").version' 2>/dev/null) of @modelcontextprotocol/sdk, $(node -p 'require("./test/openapi/node_modules/@redocly/cli/package.json").version' 2>/dev/null) of @redocly/cli, $("$claude/bin/claude.exe" --version 2>/dev/null), $(node -p 'require("./test/agenthosts/node_modules/@openai/codex/package.json").version' 2>/dev/null) of @openai/codex"
