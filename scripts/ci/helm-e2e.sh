#!/usr/bin/env bash
# Installs the chart on the test cluster and checks the runner it deploys
# (test/helm): two replicas behind the Service, every verb of a job through
# the pod that did not start it, a runner pod deleted mid-job.
#
# Needs the cluster (start-k8s.sh), helm (helm.sh) and the runner image
# built as users get it (docker-image.sh, hermes:ci by default). Imports
# that image and a small Redis image into the cluster's containerd: the
# cluster has no registry.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

image="${HERMES_IMAGE:-hermes:ci}"
kubeconfig="${HERMES_TEST_KUBECONFIG:-$HERMES_CI_STATE_DIR/k8s/admin.kubeconfig}"
[ -f "$kubeconfig" ] || die "no cluster kubeconfig at $kubeconfig (run scripts/ci/start-k8s.sh)"
docker image inspect "$image" >/dev/null 2>&1 || die "no image $image (run scripts/ci/docker-image.sh)"
command -v redis-server >/dev/null || die "redis-server missing (scripts/ci/install-packages.sh)"

# A Redis image from Debian's redis-server: the binary, the libraries it
# loads and the loader, on an empty base. Rebuilt only when the binary
# changes.
redis_bin="$(command -v redis-server)"
redis_tag="hermes-e2e-redis:$(sha256sum "$redis_bin" | cut -c1-12)"
if ! docker image inspect "$redis_tag" >/dev/null 2>&1; then
	ctx="$(mktemp -d)"
	trap 'rm -rf "$ctx"' EXIT
	mkdir -p "$ctx/rootfs/tmp" "$ctx/rootfs/usr/bin"
	chmod 1777 "$ctx/rootfs/tmp"
	cp -L "$redis_bin" "$ctx/rootfs/usr/bin/redis-server"
	for lib in $(ldd "$redis_bin" | grep -o '/[^ ]*'); do
		mkdir -p "$ctx/rootfs$(dirname "$lib")"
		cp -L "$lib" "$ctx/rootfs$lib"
	done
	printf 'FROM scratch\nCOPY rootfs/ /\nUSER 65534:65534\nENTRYPOINT ["/usr/bin/redis-server"]\n' >"$ctx/Dockerfile"
	docker build -q -t "$redis_tag" "$ctx" >"$HERMES_CI_STATE_DIR/redis-image.log" 2>&1 ||
		die "redis image build failed (log: $HERMES_CI_STATE_DIR/redis-image.log)"
	log "built $redis_tag"
fi

for img in "$image" "$redis_tag"; do
	bash "$(dirname "$0")/k8s-import-image.sh" "$img"
done

helm_bin="$(go env GOPATH)/bin/helm"
[ -x "$helm_bin" ] || die "no helm at $helm_bin (run scripts/ci/helm.sh)"
log "installing the chart on the cluster and checking it (test/helm)"
cd "$HERMES_ROOT"
HERMES_TEST_KUBECONFIG="$kubeconfig" HERMES_TEST_HELM="$helm_bin" \
	HERMES_TEST_HELM_IMAGE="$image" HERMES_TEST_HELM_REDIS_IMAGE="$redis_tag" \
	go test -count=1 -timeout 15m -v -run 'TestChartOnCluster' ./test/helm/
