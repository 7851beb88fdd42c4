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

start() {
	if query_up && port_open 127.0.0.1 "$otlp_port"; then
		log "jaeger already answering on $query"
		return 0
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
	log "jaeger ready (pid $(cat "$dir/jaeger.pid"))"
}

with_lock jaeger start
