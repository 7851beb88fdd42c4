#!/usr/bin/env bash
# Builds the binaries of the test cluster (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kubelet, kube-proxy, kubectl,
# pause) from the Go module proxy, into $HERMES_K8S_BIN (default
# ~/.cache/hermes/k8s/bin), a cache kept between CI runs like the Jaeger
# binary. Only missing binaries are built: a warm run takes a second; a cold
# one about 12-15 minutes of two cores.
#
# The sources and their pins are the reference lab's (../shared/k8slab, or
# $HERMES_K8SLAB_SRC): Kubernetes v1.37.2, the release of the k8s.io client
# modules hermes uses, and etcd v3.7.3.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

bin="${HERMES_K8S_BIN:-$HOME/.cache/hermes/k8s/bin}"
src="${HERMES_K8SLAB_SRC:-$HERMES_ROOT/../shared/k8slab}"
work="$HERMES_CI_STATE_DIR/k8slab"
all=(etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl pause)

missing=()
for b in "${all[@]}"; do
	[ -x "$bin/$b" ] || missing+=("$b")
done
if [ ${#missing[@]} -eq 0 ]; then
	log "cluster binaries present in $bin"
	exit 0
fi
[ -d "$src/tools" ] || die "no k8slab sources at $src (set HERMES_K8SLAB_SRC)"
mkdir -p "$bin" "$work"
# The reference is read-only where CI runs: build in a copy whose bin/ is
# the cache.
rm -rf "$work/tools"
cp -r "$src/tools" "$work/tools"
ln -sfn "$bin" "$work/bin"
log "building ${missing[*]} into $bin (cold: 12-15 min)"
start=$SECONDS
bash "$work/tools/build.sh" "${missing[@]}" >"$HERMES_CI_STATE_DIR/build-k8s.log" 2>&1 ||
	{ tail -n 40 "$HERMES_CI_STATE_DIR/build-k8s.log" >&2; die "cluster build failed"; }
log "built in $((SECONDS - start))s"
