#!/usr/bin/env bash
# Builds the release archives of hermes for the workstation and server
# platforms, with version, commit and build date stamped, and their SHA-256
# sums: dist/hermes-<version>-<os>-<arch>.tar.gz (the front, hermes, and the
# CLI it execs, hermes-core: install both in one directory) and
# dist/SHA256SUMS.
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
	name="hermes-$version-$os-$arch"
	echo "==> $out/$name.tar.gz"
	rm -rf "${out:?}/$name"
	CGO_ENABLED=0 GOOS="$os" GOARCH="$arch" go build -trimpath -ldflags "$ldflags" -o "$out/$name/" ./cmd/hermes ./cmd/hermes-core
	tar -C "$out/$name" --owner=0 --group=0 --numeric-owner ${SOURCE_DATE_EPOCH:+--mtime="@$SOURCE_DATE_EPOCH"} \
		-czf "$out/$name.tar.gz" hermes hermes-core
	rm -rf "${out:?}/$name"
done
(cd "$out" && sha256sum hermes-*.tar.gz >SHA256SUMS)
cat "$out/SHA256SUMS"
