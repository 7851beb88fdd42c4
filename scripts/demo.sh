#!/usr/bin/env bash
# Build hermes and run one real background job end to end on the embedded
# defaults: file receipts under $HERMES_HOME, local bash backend. Needs only Go
# and bash: no Redis, no Docker.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "==> building bin/hermes"
# Static, without cgo, as released (scripts/release.sh).
CGO_ENABLED=0 go build -o bin/hermes ./cmd/hermes
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
