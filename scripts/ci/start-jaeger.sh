#!/usr/bin/env bash
# Runs Jaeger (built by build-jaeger.sh) on loopback with in-memory storage:
# OTLP gRPC 127.0.0.1:4317, OTLP HTTP 127.0.0.1:4318, query API/UI
# 127.0.0.1:16686 (see jaeger-config.yaml). Reuses a Jaeger whose query API
# already answers there; waits up to 60 s for a fresh one.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

bin="${HERMES_JAEGER_BIN:-$HOME/.cache/hermes/bin/jaeger}"
config="$HERMES_ROOT/scripts/ci/jaeger-config.yaml"
dir="$HERMES_CI_STATE_DIR/jaeger"
query="http://127.0.0.1:${JAEGER_QUERY_HTTP_PORT:-16686}"
otlp_port="${JAEGER_OTLP_HTTP_PORT:-4318}"

query_up() {
	curl -fsS --max-time 2 "$query/api/services" >/dev/null 2>&1
}

# real_ui says whether the Jaeger answering serves the real UI, not the
# placeholder page of a binary built from the Go module.
real_ui() {
	# The whole page first: a grep -q that stops early would fail curl's
	# write, and pipefail would turn that into a wrong answer.
	local page
	page="$(curl -fsS --max-time 2 "$query/" 2>/dev/null)" || return 1
	! grep -q 'This is a placeholder for the Jaeger UI' <<<"$page"
}

# The real UI, checked and unpacked (scripts/ci/jaeger-ui.sh).
JAEGER_UI_ASSETS="$(bash "$(dirname "$0")/jaeger-ui.sh")"
export JAEGER_UI_ASSETS

start() {
	if query_up && port_open 127.0.0.1 "$otlp_port"; then
		if real_ui; then
			log "jaeger already answering on $query"
			return 0
		fi
		local old
		old="$(cat "$dir/jaeger.pid" 2>/dev/null || true)"
		if [ -n "$old" ] && kill "$old" 2>/dev/null; then
			log "restarting jaeger with the real UI"
			# Gone, with every port it held.
			wait_for 30 "old jaeger gone" sh -c "! kill -0 $old"
		else
			die "a Jaeger without the real UI answers on $query and is not ours to restart"
		fi
	fi
	local p
	for p in "${JAEGER_QUERY_HTTP_PORT:-16686}" "$otlp_port" "${JAEGER_OTLP_GRPC_PORT:-4317}"; do
		port_open 127.0.0.1 "$p" && die "127.0.0.1:$p is taken by something that is not this Jaeger"
	done
	[ -x "$bin" ] || die "$bin missing (run build-jaeger.sh)"
	mkdir -p "$dir"
	log "starting jaeger (log: $dir/jaeger.log)"
	# Run from the state dir: the binary writes nothing, but a relative path in
	# a future config must not land in the clone.
	(cd "$dir" && spawn "$dir/jaeger.log" "$bin" --config="file:$config" && echo $! >"$dir/jaeger.pid")
	if ! wait_for 60 "jaeger query API" query_up; then
		tail -n 30 "$dir/jaeger.log" >&2 || true
		die "jaeger did not answer on $query"
	fi
	wait_for 10 "OTLP HTTP port" port_open 127.0.0.1 "$otlp_port" || die "jaeger OTLP port $otlp_port not open"
	real_ui || die "jaeger on $query serves the placeholder UI, not $JAEGER_UI_ASSETS"
	log "jaeger ready with the real UI (pid $(cat "$dir/jaeger.pid"))"
}

with_lock jaeger start
