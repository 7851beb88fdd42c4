#!/usr/bin/env bash
# Installs the Debian packages the test suite needs, only those missing:
# docker.io (dockerd), redis-server (+ redis-cli), busybox-static (the test
# image's only binary), curl and util-linux's flock (used by these scripts),
# chromium (the headless browser of the Jaeger UI and console tests),
# prometheus (for promtool, which checks what /metrics serves) and tmux (the
# terminal the agent hosts' own UIs run in, in test/agenthosts).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

# package:command pairs; the command proves the package is usable.
wanted=(
	docker.io:dockerd
	redis-server:redis-server
	redis-tools:redis-cli
	busybox-static:
	curl:curl
	util-linux:flock
	chromium:chromium
	prometheus:promtool
	tmux:tmux
)

installed() {
	dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'
}

missing=()
for pair in "${wanted[@]}"; do
	pkg="${pair%%:*}" cmd="${pair#*:}"
	if installed "$pkg" && { [ -z "$cmd" ] || command -v "$cmd" >/dev/null 2>&1; }; then
		continue
	fi
	missing+=("$pkg")
done

if ((${#missing[@]} == 0)); then
	log "all packages present"
	exit 0
fi

[ "$(id -u)" = 0 ] || die "need root to install: ${missing[*]}"
log "installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq -o Dpkg::Use-Pty=0 "${missing[@]}" >"$HERMES_CI_STATE_DIR/apt.log" 2>&1 ||
	{ tail -n 40 "$HERMES_CI_STATE_DIR/apt.log" >&2; die "apt-get install failed"; }
log "installed: ${missing[*]}"
