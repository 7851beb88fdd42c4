#!/usr/bin/env bash
# Brings up the test cluster with tools/testcluster: a real single-node
# Kubernetes (etcd, kube-apiserver, controller-manager, scheduler, kubelet
# on a containerd of its own, kube-proxy) in a network namespace of its own,
# so that pods get IPs and Services work while nothing leaves the
# namespace; the API is forwarded to 127.0.0.1:6443. Needs the binaries of
# build-k8s.sh. Writes the admin kubeconfig to
# $HERMES_CI_STATE_DIR/k8s/admin.kubeconfig and prints its path. Reuses a
# cluster that answers.
#
# Test pods use the image hermes.local/busybox:1 with imagePullPolicy Never
# (there is no registry): export HERMES_TEST_KUBE_IMAGE to it.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

out="$HERMES_CI_STATE_DIR/k8s"
kubeconfig="$out/admin.kubeconfig"
tool="$out/testcluster"
mkdir -p "$out"

need=()
for c in containerd runc ctr unshare nsenter ip; do
	command -v "$c" >/dev/null || need+=("$c")
done
[ -x /usr/lib/cni/bridge ] || need+=(containernetworking-plugins)
[ -x /bin/busybox ] || need+=(busybox-static)
if [ ${#need[@]} -gt 0 ]; then
	log "installing the cluster's packages (missing: ${need[*]})"
	apt-get update -qq >/dev/null
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq containerd runc containernetworking-plugins \
		busybox-static iproute2 util-linux >/dev/null
fi
bash "$(dirname "$0")/build-k8s.sh"
(cd "$HERMES_ROOT" && go build -o "$tool.new" ./tools/testcluster) && mv "$tool.new" "$tool"
start=$SECONDS
path="$("$tool" -state "$out/cluster" up 2>"$out/up.log")" ||
	{ tail -n 40 "$out/up.log" >&2; die "cluster did not come up (log: $out/up.log)"; }
cp "$path" "$kubeconfig"
log "cluster up in $((SECONDS - start))s"
echo "$kubeconfig"
