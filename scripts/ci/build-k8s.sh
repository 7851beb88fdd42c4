#!/usr/bin/env bash
# Builds the binaries of the test cluster (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kubelet, kube-proxy, kubectl and
# the pod sandbox's pause) from the Go module proxy, into $HERMES_K8S_BIN
# (default ~/.cache/hermes/k8s/bin), a cache kept between CI runs like the
# Jaeger binary. Only missing binaries are built: a warm run takes a
# second, a cold one about 12-15 minutes of two cores (kube-apiserver alone
# about 10).
#
# The pins are tools/k8s/go.mod (Kubernetes v1.37.2, the release of the
# k8s.io client modules hermes uses) and tools/k8s/etcd/go.mod (etcd
# v3.7.3); tools/k8s/pause is our own sandbox process.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

bin="${HERMES_K8S_BIN:-$HOME/.cache/hermes/k8s/bin}"
mod="$HERMES_ROOT/tools/k8s"
version=v1.37.2
all=(etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl pause)

missing=()
for b in "${all[@]}"; do
	[ -x "$bin/$b" ] || missing+=("$b")
done
if [ ${#missing[@]} -eq 0 ]; then
	log "cluster binaries present in $bin"
	exit 0
fi
mkdir -p "$bin"
# The version the binaries report, as Kubernetes's own build stamps it.
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37 -X k8s.io/component-base/version.gitTreeState=clean"
log "building ${missing[*]} into $bin (cold: 12-15 min)"
for b in "${missing[@]}"; do
	t0=$SECONDS
	case "$b" in
	etcd) (cd "$mod/etcd" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$bin/etcd.new" .) ;;
	pause) (cd "$mod" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$bin/pause.new" ./pause) ;;
	*) (cd "$mod" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$bin/$b.new" "k8s.io/kubernetes/cmd/$b") ;;
	esac >>"$HERMES_CI_STATE_DIR/build-k8s.log" 2>&1 ||
		{ tail -n 40 "$HERMES_CI_STATE_DIR/build-k8s.log" >&2; die "building $b failed"; }
	# Renamed into place whole: an interrupted build leaves no half binary
	# that the next run would take for built.
	mv "$bin/$b.new" "$bin/$b"
	log "built $b in $((SECONDS - t0))s"
done
