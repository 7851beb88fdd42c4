#!/usr/bin/env bash
# Builds the test image (default hermes-test-busybox:latest, override with
# HERMES_TEST_DOCKER_IMAGE) FROM scratch with Debian's static busybox.
#
# Skips the build when the image exists and carries the hash of the current
# build context (Dockerfile, /etc files and the busybox binary) in its label,
# so an edited Dockerfile or a busybox upgrade still triggers a rebuild.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

image="${HERMES_TEST_DOCKER_IMAGE:-hermes-test-busybox:latest}"
src="$HERMES_ROOT/testdata/images/busybox"
busybox="${HERMES_BUSYBOX:-/bin/busybox}"
label=org.hermesrun.test.context-hash

build() {
	[ -x "$busybox" ] || die "$busybox missing (install busybox-static)"
	file -L "$busybox" 2>/dev/null | grep -q 'statically linked' ||
		ldd "$busybox" 2>&1 | grep -q 'not a dynamic executable' ||
		die "$busybox is not static (install busybox-static, not busybox)"

	local hash have
	hash="$(cat "$src/Dockerfile" "$src/passwd" "$src/group" "$busybox" | sha256sum | cut -c1-16)"
	have="$(docker image inspect --format "{{ index .Config.Labels \"$label\" }}" "$image" 2>/dev/null || true)"
	if [ "$have" = "$hash" ]; then
		log "$image up to date ($hash)"
		return 0
	fi

	local ctx
	ctx="$(mktemp -d)"
	trap 'rm -rf "$ctx"' RETURN
	cp "$src/Dockerfile" "$src/passwd" "$src/group" "$ctx/"
	cp "$busybox" "$ctx/busybox"
	log "building $image ($hash)"
	# The legacy builder: the docker CLI may come without the buildx plugin
	# that BuildKit needs, and this image needs nothing BuildKit offers.
	DOCKER_BUILDKIT=0 docker build -q --label "$label=$hash" -t "$image" "$ctx" >/dev/null
	docker run --rm --network none "$image" sh -c 'test -x /bin/sh && echo ok' | grep -qx ok ||
		die "$image built but cannot run sh"
	log "built $image"
}

with_lock test-image build
