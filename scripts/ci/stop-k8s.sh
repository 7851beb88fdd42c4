#!/usr/bin/env bash
# Stops the test cluster start-k8s.sh started, and only that.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
work="$HERMES_CI_STATE_DIR/k8slab"
if [ -x "$work/down.sh" ] || [ -f "$work/down.sh" ]; then
	K8SLAB_DIR="$work" bash "$work/down.sh"
	rm -f "$HERMES_CI_STATE_DIR/k8s/admin.kubeconfig"
	log "cluster stopped"
else
	log "no cluster of ours"
fi
