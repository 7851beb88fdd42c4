#!/usr/bin/env bash
# bench/kube.sh [N]: the kubernetes backend beside the floor on the test
# cluster (scripts/ci/start-k8s.sh): start-to-running of `hermes run -b
# --backend kubernetes` against `kubectl run` + `kubectl wait` and a bare
# client-go create + watch, as paired ratios; then pods per second through
# one runner and through two replicas on one Redis.
set -euo pipefail
# Binaries are built as released (scripts/release.sh): static, without cgo,
# which also starts faster (no dynamic loader, no libc threads).
export CGO_ENABLED=0
cd "$(dirname "$0")/.."
n="${1:-20}"
state="${HERMES_CI_STATE_DIR:-/tmp/hermes-ci}"
export KUBECONFIG="${KUBECONFIG:-$state/k8s/admin.kubeconfig}"
image="${HERMES_TEST_KUBE_IMAGE:-hermes.local/busybox:1}"
kubectl="${KUBECTL:-$HOME/.cache/hermes/k8s/bin/kubectl}"
redis="${HERMES_TEST_REDIS_URL:-redis://127.0.0.1:6390/0}"
tmp="$(mktemp -d)"
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	rm -rf "$tmp"
}
trap cleanup EXIT
go build -o "$tmp/" ./cmd/hermes ./cmd/hermes-core
go build -o "$tmp/kube" ./bench/kube
config() {
	mkdir -p "$1"
	cat >"$1/config.yaml" <<YAML
store:
  redis_url: $redis
  prefix: "hermes:{bench-kube-$$}:"
terminal:
  env: kubernetes
  kubernetes: {kubeconfig: $KUBECONFIG, image: $image, image_pull_policy: Never}
YAML
}
config "$tmp/cli"
HERMES_HOME="$tmp/cli" "$tmp/kube" -n "$n" -hermes "$tmp/hermes" -kubectl "$kubectl" -image "$image"

serve() { # serve NAME PORT
	config "$tmp/$1"
	HERMES_HOME="$tmp/$1" "$tmp/hermes" serve --listen "127.0.0.1:$2" --backends kubernetes 2>"$tmp/$1.log" &
	pids+=($!)
	for _ in $(seq 100); do curl -fsS "http://127.0.0.1:$2/healthz" >/dev/null 2>&1 && return; sleep 0.1; done
	echo "runner $1 did not start" >&2
	exit 1
}
serve a 17071
serve b 17072
for m in 1 2; do
	runners=http://127.0.0.1:17071
	[ "$m" = 2 ] && runners="$runners,http://127.0.0.1:17072"
	"$tmp/kube" -rate "${RATE_N:-30}" -runners "$runners" -image "$image"
	sleep 3
done
