#!/usr/bin/env bash
# Output capture memory: a child printing 1 GiB must leave the runner's RSS
# under 64 MiB (issue 2). Runs the same producer three ways and prints
# throughput and peak RSS of each:
#
#   baseline    bash -c 'head -c N /dev/zero | tr "\0" x | cat > /dev/null'
#   foreground  hermes run -- 'head -c N /dev/zero | tr "\0" x' > /dev/null
#   background  hermes run --background -- '...'   (the shim is the runner)
#
# Peak RSS is ru_maxrss from wait4 on the runner (bench/rss adopts the shim
# as a child subreaper), with sampled VmHWM beside it. Then the Go test
# TestOutputMemoryBound asserts the 64 MiB bound at the same size.
#
#   bench/rss.sh                  # 1 GiB, one run of each
#   BYTES=268435456 RUNS=3 bench/rss.sh
set -euo pipefail
# Binaries are built as released (scripts/release.sh): static, without cgo,
# which also starts faster (no dynamic loader, no libc threads).
export CGO_ENABLED=0

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
command -v go >/dev/null || PATH="/usr/local/go/bin:$PATH"
BYTES="${BYTES:-1073741824}"
RUNS="${RUNS:-1}"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/" ./cmd/hermes ./cmd/hermes-core
go build -o "$tmp/rss" ./bench/rss

echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) $(uname -sr), $(nproc) cores, $(go version | cut -d' ' -f3), load $(cut -d' ' -f1-3 /proc/loadavg)"
"$tmp/rss" -hermes "$tmp/hermes" -bytes "$BYTES" -runs "$RUNS" -markdown
echo
HERMES_RSS_BYTES="$BYTES" go test -count=1 -run 'TestOutputMemoryBound' -v ./cmd/hermes-core | grep -E '^(\s+rss_test|--- |ok|FAIL|PASS)'
