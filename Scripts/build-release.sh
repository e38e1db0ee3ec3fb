#!/usr/bin/env bash
# Builds the release products into .build/release:
#   vsyncd, vsync-probe   the Swift runtime (and FoundationEssentials) linked in, so they run on
#                         a machine without a Swift toolchain (they need libdrm, libstdc++, libc)
#   libvsync.so           Embedded Swift, needs only libc
#   libDisplayLinkShared.so   the Swift client library (needs the Swift runtime; --no-swift-library skips it)
#
#   Scripts/build-release.sh [--no-swift-library]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=Scripts/lib.sh
. "$here/lib.sh"
cd "$(dirname "$here")"

swiftlib=1
case "${1:-}" in
  --no-swift-library) swiftlib=0 ;;
  "") ;;
  *) die "unknown option '$1': the only one is --no-swift-library" ;;
esac
command -v swift >/dev/null || die "swift not found: install Swift 6.1 or newer (https://swift.org/install) and put it on PATH"

log "building release: vsyncd, vsync-probe (static Swift runtime), libvsync"
# -z now: every symbol bound at start, so RELRO covers the whole GOT (Debian's hardening default).
# No $ORIGIN run path: the binaries load nothing from beside themselves.
static=(--static-swift-stdlib --disable-local-rpath -Xlinker -z -Xlinker now)
swift build -c release "${static[@]}" --product vsyncd
swift build -c release "${static[@]}" --product vsync-probe
swift build -c release --product vsync
if [ $swiftlib -eq 1 ]; then
  swift build -c release --product DisplayLinkShared
fi
