#!/usr/bin/env bash
# Builds the Jaeger binary pinned by the tools/jaeger module into a cache dir
# (default $HOME/.cache/hermes/bin/jaeger; HERMES_JAEGER_BIN overrides) unless
# a binary built from the same go.mod/go.sum is already there. A cold build
# takes several minutes on two cores, so .ci/run starts this one early.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

bin="${HERMES_JAEGER_BIN:-$HOME/.cache/hermes/bin/jaeger}"
mod="$HERMES_ROOT/tools/jaeger"

build() {
	local stamp have=""
	stamp="$(cat "$mod/go.mod" "$mod/go.sum" | sha256sum | cut -c1-16)"
	[ -f "$bin.stamp" ] && have="$(cat "$bin.stamp")"
	if [ -x "$bin" ] && [ "$have" = "$stamp" ]; then
		log "$bin up to date ($stamp)"
		return 0
	fi
	command -v go >/dev/null || die "go not found"
	mkdir -p "$(dirname "$bin")"
	log "building jaeger into $bin ($stamp)"
	# Build beside the target and rename, so a reader never sees half a binary.
	GOWORK=off GOFLAGS=-mod=readonly go -C "$mod" build -trimpath -ldflags='-s -w' \
		-o "$bin.tmp" github.com/jaegertracing/jaeger/cmd/jaeger
	mv -f "$bin.tmp" "$bin"
	echo "$stamp" >"$bin.stamp"
	log "built $bin"
}

with_lock jaeger-build build
