#!/usr/bin/env bash
# Stops the test cluster start-k8s.sh started, and only that.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
out="$HERMES_CI_STATE_DIR/k8s"
if [ -x "$out/testcluster" ]; then
	"$out/testcluster" -state "$out/cluster" down
	rm -f "$out/admin.kubeconfig"
	log "cluster stopped"
else
	log "no cluster of ours"
fi
