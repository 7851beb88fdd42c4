#!/usr/bin/env bash
# Stops the test cluster start-k8s.sh started (and the KWOK of
# start-kwok.sh beside it), and only that.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
out="$HERMES_CI_STATE_DIR/k8s"
kwok="$HERMES_CI_STATE_DIR/kwok/pid"
if [ -f "$kwok" ] && kill -0 "$(cat "$kwok")" 2>/dev/null; then
	kill -- "-$(cat "$kwok")" 2>/dev/null || kill "$(cat "$kwok")"
	rm -f "$kwok"
	log "kwok stopped"
fi
if [ -x "$out/testcluster" ]; then
	"$out/testcluster" -state "$out/cluster" down
	rm -f "$out/admin.kubeconfig"
	log "cluster stopped"
else
	log "no cluster of ours"
fi
