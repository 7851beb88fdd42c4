#!/usr/bin/env bash
# Builds and vets hermes for every platform it ships for, so that no change
# breaks the macOS or arm64 builds unnoticed (their tests cannot run here).
# Arguments name the platforms (GOOS/GOARCH); default all four.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
	export PATH="/usr/local/go/bin:$PATH"
fi
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(linux/amd64 linux/arm64 darwin/amd64 darwin/arm64)
for target in "${targets[@]}"; do
	os="${target%/*}" arch="${target#*/}"
	echo "==> $os/$arch: build and vet"
	GOOS="$os" GOARCH="$arch" CGO_ENABLED=0 go build -o /dev/null ./cmd/hermes && GOOS="$os" GOARCH="$arch" CGO_ENABLED=0 go build -o /dev/null ./cmd/hermes-core
	GOOS="$os" GOARCH="$arch" CGO_ENABLED=0 go vet ./...
done
