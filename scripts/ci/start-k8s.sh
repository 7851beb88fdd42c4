#!/usr/bin/env bash
# Brings up the test cluster: a real single-node Kubernetes (etcd,
# kube-apiserver, controller-manager, scheduler, kubelet on its own
# containerd, kube-proxy) in a network namespace of its own, so that pods
# get IPs and Services work while nothing leaves the namespace; the API is
# forwarded to 127.0.0.1:6443. Needs the binaries of build-k8s.sh. Writes
# the admin kubeconfig to $HERMES_CI_STATE_DIR/k8s/admin.kubeconfig and
# prints its path. Reuses a cluster that answers.
#
# The bring-up is the reference lab's up.sh (../shared/k8slab, or
# $HERMES_K8SLAB_SRC), run from a writable copy. Test pods use the lab's
# image k8slab.local/busybox:1.35 with imagePullPolicy Never (there is no
# registry): export HERMES_TEST_KUBE_IMAGE to it.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

bin="${HERMES_K8S_BIN:-$HOME/.cache/hermes/k8s/bin}"
src="${HERMES_K8SLAB_SRC:-$HERMES_ROOT/../shared/k8slab}"
work="$HERMES_CI_STATE_DIR/k8slab"
out="$HERMES_CI_STATE_DIR/k8s"
kubeconfig="$out/admin.kubeconfig"
mkdir -p "$out"

answers() {
	[ -f "$kubeconfig" ] && "$bin/kubectl" --kubeconfig "$kubeconfig" --request-timeout=5s get --raw /readyz >/dev/null 2>&1
}
if answers; then
	log "cluster already answering ($kubeconfig)"
	echo "$kubeconfig"
	exit 0
fi
bash "$(dirname "$0")/build-k8s.sh"
[ -f "$src/up.sh" ] || die "no k8slab at $src (set HERMES_K8SLAB_SRC)"
mkdir -p "$work"
for f in up.sh down.sh smoke.sh lib images examples; do
	rm -rf "${work:?}/$f"
	[ -e "$src/$f" ] && cp -r "$src/$f" "$work/$f"
done
mkdir -p "$work/images"
ln -sfn "$bin" "$work/bin"
log "starting the cluster (netns mode)"
start=$SECONDS
K8SLAB_NETNS=1 K8SLAB_DIR="$work" bash "$work/up.sh" >"$out/up.log" 2>&1 ||
	{ tail -n 40 "$out/up.log" >&2; die "cluster did not come up (log: $out/up.log)"; }
cp "$work/state/admin.kubeconfig" "$kubeconfig"
wait_for 60 "the API server" answers || die "the API server does not answer"
wait_for 60 "a Ready node" sh -c "'$bin/kubectl' --kubeconfig '$kubeconfig' get nodes | grep -q ' Ready'"
log "cluster up in $((SECONDS - start))s"
echo "$kubeconfig"
