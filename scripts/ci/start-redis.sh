#!/usr/bin/env bash
# Starts the shared test redis-server on 127.0.0.1:${HERMES_CI_REDIS_PORT:-6390}
# (no persistence, daemonized, pidfile and logfile in the state dir) unless a
# Redis already answers PING there, then waits for PING.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

port="${HERMES_CI_REDIS_PORT:-6390}"
dir="$HERMES_CI_STATE_DIR/redis-$port"

ping() {
	[ "$(timeout 3 redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null)" = PONG ]
}

start() {
	if ping; then
		log "redis already answering on 127.0.0.1:$port"
		return 0
	fi
	if port_open 127.0.0.1 "$port"; then
		die "127.0.0.1:$port is taken by something that is not Redis"
	fi
	command -v redis-server >/dev/null || die "redis-server not installed (run install-packages.sh)"
	mkdir -p "$dir"
	log "starting redis-server on 127.0.0.1:$port (log: $dir/redis.log)"
	# daemonize: redis forks and the parent exits once the pidfile is written;
	# the fork keeps fd 9 (the lock) unless we close it here.
	redis-server --bind 127.0.0.1 --port "$port" --protected-mode yes \
		--save '' --appendonly no --dir "$dir" \
		--daemonize yes --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" 9>&-
	if ! wait_for 30 "redis PING" ping; then
		tail -n 20 "$dir/redis.log" >&2 || true
		die "redis did not answer PING on 127.0.0.1:$port"
	fi
	log "redis ready (pid $(cat "$dir/redis.pid" 2>/dev/null || echo '?'))"
}

with_lock "redis-$port" start
