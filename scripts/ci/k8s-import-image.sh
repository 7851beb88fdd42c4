#!/usr/bin/env bash
# k8s-import-image.sh IMAGE: copies a Docker image into the test cluster's
# containerd (start-k8s.sh), where pods use it with imagePullPolicy Never:
# the cluster has no registry. Skipped when the cluster already has the
# same image id.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
image="${1:?usage: k8s-import-image.sh IMAGE}"
sock="${HERMES_K8S_CONTAINERD:-$HERMES_CI_STATE_DIR/k8s/cluster/containerd.sock}"
[ -S "$sock" ] || die "no cluster containerd at $sock (run scripts/ci/start-k8s.sh)"
ctr=(ctr --address "$sock" --namespace k8s.io)
id="$(docker image inspect --format '{{.Id}}' "$image")" || die "no docker image $image"
# Docker names a short reference docker.io/library/NAME; so does the kubelet.
ref="$image"
case "$ref" in */*) ;; *) ref="docker.io/library/$ref" ;; esac
# An import also names the image by its config digest, Docker's image id.
names="$("${ctr[@]}" images ls -q 2>/dev/null || true)"
if grep -qxF "$ref" <<<"$names" && grep -qxF "$id" <<<"$names"; then
	log "$image already in the cluster"
	exit 0
fi
start=$SECONDS
docker save "$image" | "${ctr[@]}" images import - >/dev/null || die "import of $image failed"
log "imported $image into the cluster in $((SECONDS - start))s"
