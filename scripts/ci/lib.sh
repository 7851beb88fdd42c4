# shellcheck shell=bash
# Shared helpers for the scripts in scripts/ci. Source it; do not run it.
#
# Every script here is idempotent: it does its work only when its service or
# artefact is not already there and answering, so .ci/run can be rerun on a
# machine where a previous run left things running.

# Root of the repository, whatever the caller's working directory.
HERMES_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
export HERMES_ROOT

# Pidfiles, logs and locks of the CI services. /tmp, not the clone, because
# services outlive a clone and a rerun from a fresh clone must find them.
HERMES_CI_STATE_DIR="${HERMES_CI_STATE_DIR:-/tmp/hermes-ci}"
export HERMES_CI_STATE_DIR
mkdir -p "$HERMES_CI_STATE_DIR"

# Go's caches and the jaeger cache dir live under HOME, which a bare CI
# environment might not set.
: "${HOME:=$(getent passwd "$(id -u)" | cut -d: -f6)}"
export HOME

# CI's environment may lack the Go toolchain on PATH.
if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
	PATH="/usr/local/go/bin:$PATH"
	export PATH
fi

# log prints a timestamped line on stderr, tagged with the calling script.
log() {
	printf '%s [%s] %s\n' "$(date +%H:%M:%S)" "$(basename "$0" .sh)" "$*" >&2
}

# die logs its arguments and exits non-zero.
die() {
	log "ERROR: $*"
	exit 1
}

# wait_for SECONDS DESCRIPTION CMD... retries CMD every half second until it
# succeeds or SECONDS have passed; returns non-zero on timeout.
wait_for() {
	local timeout="$1" what="$2" deadline
	shift 2
	deadline=$((SECONDS + timeout))
	until "$@" >/dev/null 2>&1; do
		if ((SECONDS >= deadline)); then
			log "timed out after ${timeout}s waiting for $what"
			return 1
		fi
		sleep 0.5
	done
}

# with_lock NAME CMD... runs CMD holding an exclusive lock, so that two callers
# (two test packages building the image at once, say) do not race.
with_lock() {
	local name="$1"
	shift
	(
		flock -w 600 9 || die "could not take lock $name"
		"$@"
	) 9>"$HERMES_CI_STATE_DIR/$name.lock"
}

# spawn LOGFILE CMD... starts CMD detached in its own session, output appended
# to LOGFILE. setsid keeps the end of the caller's job from signalling it, and
# fd 9 (with_lock's lock) is closed so the service does not hold the lock for
# its whole life.
spawn() {
	local logfile="$1"
	shift
	setsid "$@" </dev/null >>"$logfile" 2>&1 9>&- &
}

# port_open HOST PORT succeeds when something accepts TCP connections there.
port_open() {
	(exec 3<>"/dev/tcp/$1/$2") 2>/dev/null
}
