#!/usr/bin/env bash
# Builds and vets hermes for every platform it ships for, so that no change
# breaks the macOS or arm64 builds unnoticed (their tests cannot run here).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
	export PATH="/usr/local/go/bin:$PATH"
fi
for target in linux/amd64 linux/arm64 darwin/amd64 darwin/arm64; do
	os="${target%/*}" arch="${target#*/}"
	echo "==> $os/$arch: build and vet"
	GOOS="$os" GOARCH="$arch" CGO_ENABLED=0 go build -o /dev/null ./cmd/hermes
	GOOS="$os" GOARCH="$arch" CGO_ENABLED=0 go vet ./...
done
