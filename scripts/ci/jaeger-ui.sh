#!/usr/bin/env bash
# Unpacks the real Jaeger UI (jaeger-ui v1.75.0, the release matching the
# pinned Jaeger module; Apache-2.0) for Jaeger's ui.assets_path, and prints
# the directory. The build comes from shared/jaeger-ui beside the clone
# (see its README: `npm ci` and `npm run build` of jaeger-ui at tag
# v1.75.0); its SHA-256 is checked before anything is unpacked.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

want=b3f8317fc9f7a8714aa34c3a94a3eebbadaff51d5a3bf9ff8e5638d7f6cc72ef
tarball="${JAEGER_UI_TARBALL:-$HERMES_ROOT/../shared/jaeger-ui/jaeger-ui-v1.75.0-build.tar.gz}"
dest="${JAEGER_UI_DIR:-$HOME/.cache/hermes/jaeger-ui-v1.75.0}"

if [ -f "$dest/index.html" ] && [ "$(cat "$dest/.sha256" 2>/dev/null)" = "$want" ]; then
	echo "$dest"
	exit 0
fi
[ -f "$tarball" ] || die "no Jaeger UI build at $tarball (shared/jaeger-ui)"
got="$(sha256sum "$tarball" | cut -d' ' -f1)"
[ "$got" = "$want" ] || die "Jaeger UI build $tarball: sha256 $got, want $want"
tmp="$(mktemp -d "${dest}.tmp.XXXXXX")"
tar -xzf "$tarball" -C "$tmp"
[ -f "$tmp/index.html" ] || die "Jaeger UI build has no index.html"
echo "$want" >"$tmp/.sha256"
rm -rf "$dest"
mv "$tmp" "$dest"
log "Jaeger UI unpacked into $dest" >&2
echo "$dest"
