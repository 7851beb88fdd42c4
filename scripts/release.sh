#!/usr/bin/env bash
# Builds the release binaries of hermes for the workstation and server
# platforms, with version, commit and build date stamped, and their SHA-256
# sums: dist/hermes-<version>-<os>-<arch> and dist/SHA256SUMS.
# VERSION defaults to `git describe`; SOURCE_DATE_EPOCH, if set, fixes the
# build date (reproducible builds).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
	export PATH="/usr/local/go/bin:$PATH"
fi
version="${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}"
commit="$(git rev-parse HEAD 2>/dev/null || echo unknown)"
if [ -n "${SOURCE_DATE_EPOCH:-}" ]; then
	date="$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)"
else
	date="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
fi
out="${DIST:-dist}"
mkdir -p "$out"
rm -f "$out"/hermes-* "$out"/SHA256SUMS
ldflags="-s -w -X main.version=$version -X main.commit=$commit -X main.buildDate=$date"
for target in linux/amd64 linux/arm64 darwin/amd64 darwin/arm64; do
	os="${target%/*}" arch="${target#*/}"
	bin="$out/hermes-$version-$os-$arch"
	echo "==> $bin"
	CGO_ENABLED=0 GOOS="$os" GOARCH="$arch" go build -trimpath -ldflags "$ldflags" -o "$bin" ./cmd/hermes
done
(cd "$out" && sha256sum hermes-* >SHA256SUMS)
cat "$out/SHA256SUMS"
