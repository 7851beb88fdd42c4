#!/usr/bin/env bash
# Build hermes and run one real background job end to end on the embedded
# defaults: file receipts under $HERMES_HOME, local bash backend. Needs only Go
# and bash: no Redis, no Docker.
set -euo pipefail
cd "$(dirname "$0")/.."

# ticking CMD... runs CMD and, while it runs, says every 10 s how long it
# has been going: on a cold cache the steps below take minutes, and a
# silent terminal looks stuck.
ticking() {
  "$@" &
  local pid=$! began=$SECONDS
  while kill -0 "$pid" 2>/dev/null; do
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      sleep 1
      kill -0 "$pid" 2>/dev/null || break 2
    done
    echo "    ... still at it ($((SECONDS - began)) s)"
  done
  wait "$pid"
}

echo "==> fetching Go modules (go mod download; the first time only, can take minutes)"
ticking go mod download

echo "==> building bin/hermes and bin/hermes-core (a cold build compiles a few hundred packages: minutes; then seconds)"
# Static, without cgo, as released (scripts/release.sh). -v names each
# package as it is compiled: counted here, every 25th reported.
built=$(mktemp)
trap 'rm -f "$built"' EXIT
ticking bash -c 'set -o pipefail; CGO_ENABLED=0 go build -v -o bin/ ./cmd/hermes ./cmd/hermes-core 2>&1 |
  awk '"'"'/^[^ :#]+$/ { n++; if (n % 25 == 0) { printf "    %d packages compiled\n", n; fflush() }; next }
       { print; fflush() }
       END { print n + 0 > "/dev/stderr" }'"'"' 2>"$0"' "$built"
echo "    built bin/hermes and bin/hermes-core (packages compiled: $(cat "$built")); to put hermes on your PATH: make install"
export HERMES_HOME="${HERMES_HOME:-$(mktemp -d -t hermes-demo.XXXXXX)}"
echo "==> profile: HERMES_HOME=$HERMES_HOME"

echo "==> starting a background job (this hermes process exits right away)"
start=$(bin/hermes run --background -- \
  'sleep 2; echo "review complete"; echo "a warning on stderr" >&2; exit 7')
echo "$start"
id=$(printf '%s' "$start" | sed -n 's/.*"session_id":"\(proc_[0-9a-f]*\)".*/\1/p')

echo "==> live processes (hermes ps)"
bin/hermes ps

echo "==> waiting from a fresh hermes process (exits with the job's code)"
set +e
bin/hermes wait "$id"
code=$?
set -e
echo "hermes wait exited with $code"

echo "==> the durable receipt, read by yet another process (hermes log --json)"
bin/hermes log "$id" --json

echo "==> retained receipts (hermes ps --retained)"
bin/hermes ps --retained
echo "==> receipt file: $HERMES_HOME/logs/process-results/$id.json"
