#!/usr/bin/env bash
# Redraws the pictures of docs/ (Jaeger traces, the web console) from the
# browser tests that check what they show: starts Jaeger (built by
# scripts/ci/build-jaeger.sh) and runs those tests with
# HERMES_UPDATE_DOC_IMAGES=1, which makes each screenshot the docs show
# replace its file. Needs Chromium. Review with git diff --stat docs/.
set -euo pipefail
cd "$(dirname "$0")/.."
export HERMES_CI_STATE_DIR="${HERMES_CI_STATE_DIR:-/tmp/hermes-ci}"
mkdir -p "$HERMES_CI_STATE_DIR"
bash scripts/ci/start-jaeger.sh
export HERMES_TEST_JAEGER_URL=http://127.0.0.1:16686
export HERMES_TEST_OTLP_ENDPOINT=http://127.0.0.1:4318
export HERMES_UPDATE_DOC_IMAGES=1
go test -count=1 -run 'TestJaegerUI|TestConsoleInABrowser' ./cmd/hermes-core/ ./server/ "$@"
git status --short -- docs/
