#!/usr/bin/env bash
# Builds the hermes image from the repository's Dockerfile and smoke-tests it,
# with no image registry: the Dockerfile's build base (BUILDER_IMAGE) is a
# stand-in made here with `docker import`, the final base is scratch.
#
# The stand-in builder is a tarball of:
#   - the host's Go toolchain at /usr/local/go (hard links, so no copy),
#   - Debian's static busybox as /bin/sh and the usual applets,
#   - the host's CA bundle,
#   - /goproxy: a file-system module proxy holding exactly the modules of
#     go.mod's graph, copied from the host's module cache, so the Dockerfile's
#     `go mod download` runs for real but with the build's network off.
#   - /root/.cache/go-build: the build cache of the standard library and
#     the third-party packages, compiled as the Dockerfile compiles them
#     (dep_cache), so that the image's build compiles only hermes itself.
# It is tagged with a hash of everything that goes into it and reused while
# that hash holds (a new go.sum or Go release makes a new one).
#
# Smoke tests: `hermes --version` in the image; then, once the binary has a
# `serve` command, `hermes serve` in the image against CI's Redis, the way
# the Helm chart runs it (its flags, a read-only root file system, all
# capabilities dropped, config.yaml mounted into the home, a tokens
# directory, the engine's socket): /healthz, /readyz and /metrics answer, a
# request without a token gets 401, a docker job started through the API
# ends with its exit code, output and receipt, another tenant's token gets
# 404 on it, and SIGTERM stops the server cleanly (exit status 0).
#
# Environment: HERMES_CI_IMAGE (default hermes:ci), HERMES_CI_REDIS_PORT
# (6390), HERMES_CI_SERVE_PORT (7071), VERSION (default: git describe).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

image="${HERMES_CI_IMAGE:-hermes:ci}"
redis_port="${HERMES_CI_REDIS_PORT:-6390}"
serve_port="${HERMES_CI_SERVE_PORT:-7071}"
busybox="${HERMES_BUSYBOX:-/bin/busybox}"
builder_repo=hermes-ci-builder
container=hermes-ci-serve-$$

# elapsed prints the seconds since $1 (a $SECONDS value).
elapsed() { echo "$((SECONDS - $1))s"; }

# dep_cache DIR fills DIR, a Go build cache, with the compiled standard
# library and third-party packages of ./cmd/hermes and ./cmd/hermes-core, built as the
# Dockerfile builds (CGO_ENABLED=0, -trimpath, the same toolchain at the
# same GOROOT). With -trimpath a package's cache key holds no directory,
# so the image's build finds them and compiles only hermes's own
# packages: the dependencies change with go.sum, which keys this image,
# while hermes changes every commit (a cold build in the image took
# 318 s a run).
dep_cache() {
	local dir="$1" pkgs t0=$SECONDS
	mkdir -p "$dir"
	pkgs="$(cd "$HERMES_ROOT" && go list -deps \
		-f '{{if not .Standard}}{{with .Module}}{{if not .Main}}{{$.ImportPath}}{{end}}{{end}}{{end}}' ./cmd/hermes ./cmd/hermes-core)"
	# shellcheck disable=SC2086 # one word per package
	(cd "$HERMES_ROOT" && GOCACHE="$dir" CGO_ENABLED=0 GOFLAGS=-mod=readonly go build -trimpath $pkgs) ||
		die "building the dependencies' cache failed"
	log "dependency build cache: $(wc -l <<<"$pkgs") packages, $(du -sh "$dir" | cut -f1), $(elapsed "$t0")"
}

# module_proxy DIR fills DIR with a GOPROXY=file:// tree (cache/download
# layout) for the main module: .mod and .info of every module version in the
# graph, .zip and .ziphash of every selected version.
module_proxy() {
	local dir="$1" cache mv path ver esc_path esc_ver src n=0
	cache="$(go env GOMODCACHE)/cache/download"
	(cd "$HERMES_ROOT" && go mod download) || die "go mod download failed on the host"
	# Case-encode as the module cache does: an upper-case letter becomes '!'
	# and its lower-case form.
	while read -r mv; do
		path="${mv%@*}" ver="${mv##*@}"
		esc_path="$(sed -E 's/([A-Z])/!\L\1/g' <<<"$path")"
		esc_ver="$(sed -E 's/([A-Z])/!\L\1/g' <<<"$ver")"
		src="$cache/$esc_path/@v"
		[ -f "$src/$esc_ver.mod" ] || continue
		mkdir -p "$dir/$esc_path/@v"
		cp "$src/$esc_ver.mod" "$dir/$esc_path/@v/"
		cp "$src/$esc_ver.info" "$dir/$esc_path/@v/" 2>/dev/null || true
		n=$((n + 1))
	done < <(cd "$HERMES_ROOT" && go mod graph | tr ' ' '\n' | grep '@' | sort -u)
	while read -r path ver; do
		esc_path="$(sed -E 's/([A-Z])/!\L\1/g' <<<"$path")"
		esc_ver="$(sed -E 's/([A-Z])/!\L\1/g' <<<"$ver")"
		src="$cache/$esc_path/@v"
		mkdir -p "$dir/$esc_path/@v"
		for f in "$esc_ver.mod" "$esc_ver.info" "$esc_ver.zip" "$esc_ver.ziphash"; do
			[ -f "$src/$f" ] && cp "$src/$f" "$dir/$esc_path/@v/"
		done
	done < <(cd "$HERMES_ROOT" && go list -m -f '{{if not .Main}}{{.Path}} {{.Version}}{{end}}' all)
	log "module proxy: $n module versions, $(du -sh "$dir" | cut -f1)"
}

# builder_image prints the tag of an up-to-date stand-in builder image,
# making it first when needed.
builder_image() {
	local goroot key tag stage t0
	goroot="$(go env GOROOT)"
	[ -x "$busybox" ] || die "$busybox missing (install busybox-static)"
	key="$({
		go version
		cat "$HERMES_ROOT/go.mod" "$HERMES_ROOT/go.sum" "$busybox" /etc/ssl/certs/ca-certificates.crt 2>/dev/null
		# This function's own text: a change to how the image is made
		# must make a new one.
		declare -f builder_image module_proxy dep_cache
	} | sha256sum | cut -c1-16)"
	tag="$builder_repo:$key"
	if docker image inspect "$tag" >/dev/null 2>&1; then
		log "stand-in builder $tag up to date" >&2
		echo "$tag"
		return 0
	fi
	t0=$SECONDS
	stage="$(mktemp -d)"
	# This function runs in a command substitution's subshell: EXIT is its end.
	# shellcheck disable=SC2064 # expand now: $stage is local.
	trap "rm -rf '$stage'" EXIT
	mkdir -p "$stage/bin" "$stage/etc/ssl/certs" "$stage/tmp" "$stage/root" "$stage/usr/local" "$stage/goproxy"
	chmod 1777 "$stage/tmp"
	cp "$busybox" "$stage/bin/busybox"
	local applet
	for applet in $("$busybox" --list); do
		[ "$applet" = busybox ] || ln -s busybox "$stage/bin/$applet"
	done
	cp /etc/ssl/certs/ca-certificates.crt "$stage/etc/ssl/certs/" 2>/dev/null || true
	# Hard links when the stage is on the same file system as GOROOT; a copy
	# otherwise. test/, api/ and doc/ are not needed to build.
	mkdir -p "$stage/usr/local/go"
	local entry
	for entry in "$goroot"/*; do
		case "${entry##*/}" in test | api | doc | misc) continue ;; esac
		cp -al "$entry" "$stage/usr/local/go/" 2>/dev/null || cp -a "$entry" "$stage/usr/local/go/"
	done
	module_proxy "$stage/goproxy" >&2
	dep_cache "$stage/root/.cache/go-build" >&2
	log "importing $tag ($(du -sh "$stage" | cut -f1) staged)" >&2
	tar -C "$stage" -c . | docker import \
		--change 'ENV PATH=/usr/local/go/bin:/bin' \
		--change 'ENV HOME=/root' \
		--change 'ENV GOPROXY=file:///goproxy' \
		--change 'ENV GOSUMDB=off' \
		--change 'ENV GOTOOLCHAIN=local' \
		--change 'ENV GOFLAGS=-mod=readonly' \
		--change "LABEL org.hermesrun.ci.builder-key=$key" \
		- "$tag" >/dev/null
	log "made stand-in builder $tag in $(elapsed "$t0")" >&2
	# Older stand-ins only take disk space.
	docker image ls --format '{{.Repository}}:{{.Tag}}' "$builder_repo" |
		grep -vx "$tag" | xargs -r docker rmi >/dev/null 2>&1 || true
	echo "$tag"
}

build() {
	local builder version t0 size stage_tag="$builder_repo-stage:latest" old new id
	builder="$(builder_image)"
	version="${VERSION:-$(git -C "$HERMES_ROOT" describe --always --dirty 2>/dev/null || echo dev)}"
	t0=$SECONDS
	log "docker build $image (BUILDER_IMAGE=$builder BASE_IMAGE=scratch VERSION=$version)"
	# The classic builder unless buildx is there: BuildKit needs that plugin.
	local buildkit=0
	docker buildx version >/dev/null 2>&1 && buildkit=1
	local -a args=(--network none --build-arg "BUILDER_IMAGE=$builder"
		--build-arg BASE_IMAGE=scratch --build-arg "VERSION=$version")
	# The build stage is tagged too (its second build below is all cache):
	# then the previous run's images are known by id and removed once
	# replaced, instead of piling up as untagged layers, a few hundred MB
	# a run, while the current ones stay as the next run's cache.
	old="$(docker image inspect -f '{{.Id}}' "$image" "$stage_tag" 2>/dev/null || true)"
	if ! { DOCKER_BUILDKIT=$buildkit docker build "${args[@]}" --target build -t "$stage_tag" "$HERMES_ROOT" &&
		DOCKER_BUILDKIT=$buildkit docker build "${args[@]}" -t "$image" "$HERMES_ROOT"; } \
		>"$HERMES_CI_STATE_DIR/docker-build.log" 2>&1; then
		tail -n 40 "$HERMES_CI_STATE_DIR/docker-build.log" >&2
		die "docker build failed (log: $HERMES_CI_STATE_DIR/docker-build.log)"
	fi
	new="$(docker image inspect -f '{{.Id}}' "$image" "$stage_tag")"
	for id in $old; do
		grep -qxF "$id" <<<"$new" || docker rmi "$id" >/dev/null 2>&1 || true
	done
	size="$(docker image inspect -f '{{.Size}}' "$image")"
	log "built $image in $(elapsed "$t0"): $((size / 1024)) KiB ($(awk -v s="$size" 'BEGIN{printf "%.1f MB", s/1e6}'))"

	local user out
	user="$(docker image inspect -f '{{.Config.User}}' "$image")"
	[ "$user" = 65532:65532 ] || die "image user is '$user', want 65532:65532"
	out="$(docker run --rm --network none "$image" --version)" || die "hermes --version failed in $image"
	grep -qF "$version" <<<"$out" || die "hermes --version printed '$out', want it to contain $version"
	log "hermes --version in the image: $out"
}

# serve_smoke runs `hermes serve` from the image against CI's Redis.
serve_smoke() {
	if ! docker run --rm --network none "$image" serve --help >/dev/null 2>&1; then
		log "this hermes has no serve command yet: serve smoke test skipped"
		return 0
	fi
	"$HERMES_ROOT/scripts/ci/start-redis.sh"
	port_open 127.0.0.1 "$serve_port" && die "127.0.0.1:$serve_port is already taken"

	local dir t0 base="http://127.0.0.1:$serve_port" sock=/var/run/docker.sock code
	t0=$SECONDS
	dir="$(mktemp -d)"
	# EXIT, not RETURN: die exits the script and the container must go too.
	# shellcheck disable=SC2064 # expand now: both are local.
	trap "docker rm -f '$container' >/dev/null 2>&1 || true; rm -rf '$dir'" EXIT
	# Two tenants; the file must be readable by the image's user.
	local token_a="ci-smoke-a-$$-$RANDOM$RANDOM" token_b="ci-smoke-b-$$-$RANDOM$RANDOM"
	mkdir -p "$dir/tokens"
	printf '%s ci-a\n%s ci-b\n' "$token_a" "$token_b" >"$dir/tokens/tokens"
	# config.yaml as the chart mounts it: one file inside the home volume,
	# shared by the tenants; the job below names no image and gets this one.
	printf 'terminal:\n  env: docker\n  docker_image: hermes-test-busybox:latest\n' >"$dir/config.yaml"
	chmod -R a+rX "$dir"
	# The engine's socket, as the chart's docker.mode=socket mounts it: the
	# runner's user gets the socket's group.
	local -a docker_args=()
	if [ -S "$sock" ]; then
		"$HERMES_ROOT/scripts/ci/build-test-image.sh"
		docker_args=(-v "$sock:$sock" --group-add "$(stat -c %g "$sock")")
	fi
	docker run -d --name "$container" --network host \
		--read-only --tmpfs /tmp --tmpfs /var/lib/hermes:uid=65532,gid=65532,mode=0700 \
		--cap-drop ALL --security-opt no-new-privileges \
		-v "$dir/tokens:/etc/hermes/tokens:ro" -v "$dir/config.yaml:/var/lib/hermes/config.yaml:ro" \
		"${docker_args[@]}" \
		-e "HERMES_REDIS_URL=redis://127.0.0.1:$redis_port/0" \
		"$image" serve --listen="127.0.0.1:$serve_port" --tokens=/etc/hermes/tokens/tokens \
		--shutdown-timeout=30s --backends=docker >/dev/null

	if ! wait_for 30 "hermes serve /readyz" curl -fsS --max-time 2 "$base/readyz"; then
		docker logs "$container" 2>&1 | tail -n 30 >&2
		die "hermes serve in $image did not become ready"
	fi
	curl -fsS --max-time 5 "$base/healthz" >/dev/null || die "/healthz failed"
	# Read the whole body first: grep -q stops at its first match, and
	# with pipefail curl's failed write (error 23) would fail the check.
	metrics="$(curl -fsS --max-time 5 "$base/metrics")" || die "/metrics does not answer"
	grep -q '^# ' <<<"$metrics" || die "/metrics has no Prometheus text"
	code="$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$base/v1/processes")"
	[ "$code" = 401 ] || die "unauthenticated GET /v1/processes got $code, want 401"
	log "hermes serve in the image: healthz, readyz, metrics and 401 OK ($(elapsed "$t0"))"

	if [ -S "$sock" ]; then
		# A docker job through the API, from start to receipt, and the
		# other tenant's 404 on its id.
		local auth_a="Authorization: Bearer $token_a" auth_b="Authorization: Bearer $token_b" resp id
		resp="$(curl -fsS --max-time 30 -H "$auth_a" -H 'Content-Type: application/json' \
			-d '{"command":"echo hermes-image-smoke; exit 3","backend":"docker"}' \
			"$base/v1/processes")" || { docker logs "$container" 2>&1 | tail -n 30 >&2; die "POST /v1/processes failed"; }
		id="$(grep -o '"session_id":"proc_[0-9a-f]*"' <<<"$resp" | head -n1 | cut -d'"' -f4)"
		[ -n "$id" ] || die "start answered without a process id: $resp"
		resp="$(curl -fsS --max-time 70 -X POST -H "$auth_a" "$base/v1/processes/$id/wait?timeout=60s")" ||
			die "wait for $id failed"
		grep -q '"exit_code":3' <<<"$resp" && grep -q 'hermes-image-smoke' <<<"$resp" ||
			die "wait for $id: want exit code 3 and the output, got: $resp"
		resp="$(curl -fsS --max-time 10 -H "$auth_a" "$base/v1/receipts/$id")" || die "receipt of $id missing"
		grep -q '"backend":"docker"' <<<"$resp" || die "receipt of $id: $resp"
		code="$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 -H "$auth_b" "$base/v1/receipts/$id")"
		[ "$code" = 404 ] || die "tenant ci-b read tenant ci-a's receipt: HTTP $code, want 404"
		log "docker job $id through the API in the image: exit 3, output and receipt OK; other tenant gets 404"
	else
		log "no Docker socket at $sock: API job smoke test skipped"
	fi

	# SIGTERM (docker stop) must end it by itself, with status 0.
	docker stop -t 20 "$container" >/dev/null
	code="$(docker inspect -f '{{.State.ExitCode}}' "$container")"
	if [ "$code" != 0 ]; then
		docker logs "$container" 2>&1 | tail -n 30 >&2
		die "hermes serve exited $code on SIGTERM, want 0"
	fi
	log "hermes serve stopped cleanly on SIGTERM"
}

main() {
	local t0=$SECONDS
	command -v docker >/dev/null || die "docker CLI not installed (run install-packages.sh)"
	"$HERMES_ROOT/scripts/ci/start-docker.sh"
	with_lock docker-image build
	serve_smoke
	log "docker image checks passed in $(elapsed "$t0")"
}

main "$@"
