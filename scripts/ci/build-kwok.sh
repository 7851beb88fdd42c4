#!/usr/bin/env bash
# Builds KWOK (tools/kwok pins sigs.k8s.io/kwok v0.8.0) into the cache of
# the test cluster's binaries, $HERMES_K8S_BIN (default
# ~/.cache/hermes/k8s/bin), as kwok-<version>: a warm run takes a second,
# a cold one a few minutes of two cores.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

bin="${HERMES_K8S_BIN:-$HOME/.cache/hermes/k8s/bin}"
mod="$HERMES_ROOT/tools/kwok"
version="$(cd "$mod" && go list -m -f '{{.Version}}' sigs.k8s.io/kwok)"
out="$bin/kwok-$version"
if [ -x "$out" ]; then
	log "kwok $version present in $bin"
	exit 0
fi
mkdir -p "$bin"
t0=$SECONDS
log "building kwok $version into $bin"
(cd "$mod" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$out.new" sigs.k8s.io/kwok/cmd/kwok) \
	>>"$HERMES_CI_STATE_DIR/build-kwok.log" 2>&1 ||
	{ tail -n 40 "$HERMES_CI_STATE_DIR/build-kwok.log" >&2; die "building kwok failed"; }
mv "$out.new" "$out"
log "built kwok in $((SECONDS - t0))s"
