#!/usr/bin/env bash
# Starts dockerd in the background unless an engine already answers on
# /var/run/docker.sock, then waits (up to 60 s) for `docker info`.
#
# The engine is started with no default bridge and no iptables rules
# (HERMES_CI_DOCKERD_ARGS overrides): test containers need no network, get only
# a loopback interface, and the daemon starts faster and touches no firewall.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

sock=/var/run/docker.sock
logfile="$HERMES_CI_STATE_DIR/dockerd.log"
read -r -a dockerd_args <<<"${HERMES_CI_DOCKERD_ARGS:---bridge=none --iptables=false}"

engine_up() {
	curl -fsS --max-time 5 --unix-socket "$sock" http://docker/_ping >/dev/null 2>&1
}

start() {
	if engine_up; then
		log "dockerd already answering on $sock"
		return 0
	fi
	if pgrep -x dockerd >/dev/null; then
		# Another dockerd is still starting (or a concurrent run started one):
		# wait for it rather than start a second daemon on the same root.
		log "dockerd process present but not answering yet; waiting"
	else
		command -v dockerd >/dev/null || die "dockerd not installed (run install-packages.sh)"
		[ "$(id -u)" = 0 ] || die "need root to start dockerd"
		log "starting dockerd ${dockerd_args[*]} (log: $logfile)"
		spawn "$logfile" dockerd "${dockerd_args[@]}"
	fi
	if ! wait_for 60 "dockerd" docker info; then
		tail -n 30 "$logfile" >&2 || true
		die "dockerd did not answer within 60s"
	fi
	log "dockerd ready ($(docker version --format '{{.Server.Version}}' 2>/dev/null || echo '?'))"
}

with_lock docker start
