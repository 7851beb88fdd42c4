#!/usr/bin/env bash
# Starts KWOK beside the test cluster (start-k8s.sh first) and adds
# simulated nodes to it: $HERMES_KWOK_NODES (default 10) nodes named
# kwok-node-N, annotated kwok.x-k8s.io/node=fake (what KWOK manages),
# labelled type=kwok and tainted kwok.x-k8s.io/node=fake:NoSchedule, so
# that only pods asking for them (node_selector type: kwok and a
# toleration, docs/deploy.md) land there and the real node keeps the rest.
# Their pods' lifecycle is tools/kwok/stages.yaml. Reuses a KWOK that
# runs, and adds nodes up to the count. Prints the kubeconfig's path.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

bin="${HERMES_K8S_BIN:-$HOME/.cache/hermes/k8s/bin}"
kubeconfig="$HERMES_CI_STATE_DIR/k8s/admin.kubeconfig"
out="$HERMES_CI_STATE_DIR/kwok"
nodes="${HERMES_KWOK_NODES:-10}"
mkdir -p "$out"
[ -f "$kubeconfig" ] || die "no test cluster (scripts/ci/start-k8s.sh first)"
bash "$(dirname "$0")/build-kwok.sh" >&2
version="$(cd "$HERMES_ROOT/tools/kwok" && go list -m -f '{{.Version}}' sigs.k8s.io/kwok)"
kubectl=("$bin/kubectl" --kubeconfig "$kubeconfig")

# KWOK logs every pod patch at INFO: thousands of lines a round, CPU the
# control plane and the runners need on a small machine.
flags=(--manage-all-nodes=false --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake
	--cidr 10.128.0.0/16 --node-ip 127.0.0.1 --node-lease-duration-seconds 40 --v WARN)
# A KWOK that runs with other stages or flags than these (an older
# checkout's) is restarted: it reads them only at start.
stages="$( (cat "$HERMES_ROOT/tools/kwok/stages.yaml"; echo "${flags[*]}") | sha256sum | cut -d' ' -f1)"
if [ -f "$out/pid" ] && kill -0 "$(cat "$out/pid")" 2>/dev/null && [ "$(cat "$out/stages" 2>/dev/null)" != "$stages" ]; then
	log "kwok runs with other stages or flags: restarting it"
	kill "$(cat "$out/pid")" 2>/dev/null || true
	for _ in $(seq 50); do kill -0 "$(cat "$out/pid")" 2>/dev/null || break; sleep 0.1; done
fi
if [ -f "$out/pid" ] && kill -0 "$(cat "$out/pid")" 2>/dev/null; then
	log "kwok already running (pid $(cat "$out/pid"))"
else
	# Pod IPs are only status here, from a range of their own; the node IP
	# is loopback, so that the API server's calls for logs, exec and
	# attach fail at once instead of timing out.
	setsid "$bin/kwok-$version" --kubeconfig "$kubeconfig" "${flags[@]}" \
		--config "$HERMES_ROOT/tools/kwok/stages.yaml" </dev/null >"$out/kwok.log" 2>&1 &
	echo $! >"$out/pid"
	echo "$stages" >"$out/stages"
	log "kwok $version started (pid $!, log $out/kwok.log)"
fi

manifest=""
for i in $(seq 0 $((nodes - 1))); do
	manifest+="apiVersion: v1
kind: Node
metadata:
  name: kwok-node-$i
  annotations: {kwok.x-k8s.io/node: fake}
  labels: {type: kwok, kubernetes.io/hostname: kwok-node-$i}
spec:
  taints: [{key: kwok.x-k8s.io/node, value: fake, effect: NoSchedule}]
---
"
done
echo "$manifest" | "${kubectl[@]}" apply -f - >/dev/null
if ! "${kubectl[@]}" wait --for=condition=Ready node -l type=kwok --timeout=90s >/dev/null; then
	tail -n 30 "$out/kwok.log"
	die "the simulated nodes did not become Ready"
fi
log "$nodes simulated nodes Ready"
echo "$kubeconfig"
