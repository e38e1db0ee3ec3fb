#!/usr/bin/env bash
# Builds a release of vsyncd and installs the binaries, the systemd units and the DisplayLink
# library, then (unless --no-enable) enables and starts vsyncd.socket.
#
#   sudo Scripts/install.sh [--prefix /usr/local] [--destdir DIR] [--no-enable]
#
# --destdir stages the files under DIR (for packaging and for tests) and implies --no-enable.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")
# shellcheck source=Scripts/lib.sh
. "$here/lib.sh"

prefix=/usr/local destdir="" enable=1
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix=$2; shift 2 ;;
    --destdir) destdir=$2; enable=0; shift 2 ;;
    --no-enable) enable=0; shift ;;
    -h|--help) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1': see --help" ;;
  esac
done

ensure_packages libdrm-dev pkg-config
cd "$repo"
log "building release"
swift build -c release --product vsyncd
swift build -c release --product vsync-probe
bin=$(swift build -c release --show-bin-path)

root="$destdir$prefix"
install -d "$root/bin" "$root/lib" "$root/share/doc/vsyncd" "$destdir/etc/systemd/system"
install -m 0755 "$bin/vsyncd" "$bin/vsync-probe" "$root/bin/"
# The client library as source-level Swift modules is for SwiftPM users (depend on this
# package); the installed copies are for apps that link the prebuilt objects.
for m in DisplayLink VsyncCore; do
  install -d "$root/lib/swift/vsyncd/$m.swiftmodule"
  [ -e "$bin/Modules/$m.swiftmodule" ] && cp "$bin/Modules/$m.swiftmodule" "$root/lib/swift/vsyncd/$m.swiftmodule/x86_64-unknown-linux-gnu.swiftmodule" 2>/dev/null || true
done
if ls "$bin"/DisplayLink.build/*.o >/dev/null 2>&1; then
  ar rcs "$root/lib/libDisplayLink.a" "$bin"/DisplayLink.build/*.o "$bin"/VsyncCore.build/*.o
fi
install -m 0644 README.md docs/PROTOCOL.md "$root/share/doc/vsyncd/"
sed "s|/usr/local/bin/vsyncd|$prefix/bin/vsyncd|" systemd/vsyncd.service > "$destdir/etc/systemd/system/vsyncd.service"
install -m 0644 systemd/vsyncd.socket "$destdir/etc/systemd/system/vsyncd.socket"
log "installed under ${destdir:-/}${destdir:+ (staged)}: $prefix/bin/vsyncd, $prefix/bin/vsync-probe, /etc/systemd/system/vsyncd.{service,socket}"

if [ $enable -eq 1 ]; then
  if [ -d /run/systemd/system ]; then
    systemctl daemon-reload
    systemctl enable --now vsyncd.socket
    log "vsyncd.socket enabled: the first client starts vsyncd"
  else
    log "systemd is not running here: start the daemon by hand with '$prefix/bin/vsyncd --socket /run/vsyncd/vsyncd.sock'"
  fi
fi
