#!/usr/bin/env bash
# The project's test command: build, vet, format check, then every test
# under the race detector.
# Extra arguments go to `go test` (e.g. scripts/test.sh -run TestX).
# Tests needing Redis, Docker or Jaeger skip without them unless CI is set;
# scripts/ci/*.sh start them (as .ci/run does).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
	export PATH="/usr/local/go/bin:$PATH"
fi

go build ./...
go vet ./...
# testdata may hold deliberately odd Go files; tools/ holds separate modules.
unformatted="$(git ls-files -z -- '*.go' ':!:**/testdata/**' ':!:tools/**' | xargs -0r gofmt -l)"
if [ -n "$unformatted" ]; then
	echo "gofmt needed on:" >&2
	echo "$unformatted" >&2
	exit 1
fi
# -race: the runner is concurrent by nature (supervisors, pumps, retries).
go test -race -count=1 -timeout 30m "$@" ./...
