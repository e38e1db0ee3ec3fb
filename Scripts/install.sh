#!/usr/bin/env bash
# Builds a release of vsyncd and installs the binaries, the systemd units, the DisplayLink
# library and libvsync (the C library, its header and vsync.pc), then (unless --no-enable)
# enables and starts vsyncd.socket.
#
#   sudo Scripts/install.sh [--prefix /usr/local] [--destdir DIR] [--bin-dir DIR] [--no-enable]
#
# --destdir stages the files under DIR (for packaging and for tests) and implies --no-enable.
# --bin-dir installs binaries already built there (e.g. .build/debug) instead of building a release.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")
# shellcheck source=Scripts/lib.sh
. "$here/lib.sh"

prefix=/usr/local destdir="" enable=1 bin=""
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix=$2; shift 2 ;;
    --destdir) destdir=$2; enable=0; shift 2 ;;
    --no-enable) enable=0; shift ;;
    --bin-dir) bin=$(cd "$2" && pwd); shift 2 ;;
    -h|--help) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1': see --help" ;;
  esac
done

cd "$repo"
if [ -z "$bin" ]; then
  ensure_packages libdrm-dev pkg-config
  log "building release"
  swift build -c release --product vsyncd >&2
  swift build -c release --product vsync-probe >&2
  swift build -c release --product DisplayLinkShared >&2
  swift build -c release --product vsync >&2
  bin=$(swift build -c release --show-bin-path)
fi
for f in vsyncd vsync-probe; do
  [ -x "$bin/$f" ] || die "no $bin/$f: build it first ('swift build -c release')"
done

root="$destdir$prefix"
install -d "$root/bin" "$root/lib" "$root/share/doc/vsyncd" "$destdir/etc/systemd/system"
install -m 0755 "$bin/vsyncd" "$bin/vsync-probe" "$root/bin/"
# The client library for apps built outside SwiftPM: the shared library and its modules
# (swiftc -I PREFIX/lib/swift/vsyncd -L PREFIX/lib -lDisplayLinkShared). SwiftPM users depend
# on this package's DisplayLink product instead.
if [ -e "$bin/libDisplayLinkShared.so" ]; then
  install -m 0755 "$bin/libDisplayLinkShared.so" "$root/lib/"
  install -d "$root/lib/swift/vsyncd"
  for m in DisplayLink VsyncClientCore VsyncCore; do
    for ext in swiftmodule swiftdoc swiftinterface; do
      [ -e "$bin/Modules/$m.$ext" ] && install -m 0644 "$bin/Modules/$m.$ext" "$root/lib/swift/vsyncd/"
    done
  done
  # The client core's libc shim: the compiler loads it with VsyncClientCore's module.
  install -d "$root/lib/swift/vsyncd/CVsyncSys"
  install -m 0644 Sources/CVsyncSys/module.modulemap Sources/CVsyncSys/shim.h "$root/lib/swift/vsyncd/CVsyncSys/"
else
  log "no libDisplayLinkShared.so in $bin: library not installed (build it with 'swift build --product DisplayLinkShared')"
fi
# libvsync, for C, C++, Rust and Python: the real file, its SONAME link and the development
# link, the header and vsync.pc (cc app.c $(pkg-config --cflags --libs vsync)).
if [ -e "$bin/libvsync.so" ]; then
  version=$(sed -n 's/.*static let string = "\(.*\)".*/\1/p' Sources/VsyncCore/Version.swift)
  install -d "$root/include/vsync" "$root/lib/pkgconfig"
  install -m 0755 "$bin/libvsync.so" "$root/lib/libvsync.so.$version"
  ln -sfn "libvsync.so.$version" "$root/lib/libvsync.so.0"
  ln -sfn libvsync.so.0 "$root/lib/libvsync.so"
  install -m 0644 include/vsync/vsync.h "$root/include/vsync/"
  sed -e "s|@PREFIX@|$prefix|" -e "s|@LIBDIR@|$prefix/lib|" -e "s|@INCLUDEDIR@|$prefix/include|" \
      -e "s|@VERSION@|$version|" Sources/libvsync/vsync.pc.in > "$root/lib/pkgconfig/vsync.pc"
  install -m 0644 docs/LIBVSYNC.md "$root/share/doc/vsyncd/"
  [ -z "$destdir" ] && command -v ldconfig >/dev/null && ldconfig
else
  log "no libvsync.so in $bin: libvsync not installed (build it with 'swift build --product vsync')"
fi
install -m 0644 README.md docs/PROTOCOL.md "$root/share/doc/vsyncd/"
sed "s|/usr/local/bin/vsyncd|$prefix/bin/vsyncd|" systemd/vsyncd.service > "$destdir/etc/systemd/system/vsyncd.service"
install -m 0644 systemd/vsyncd.socket "$destdir/etc/systemd/system/vsyncd.socket"
log "installed under ${destdir:-/}${destdir:+ (staged)}: $prefix/bin/vsyncd, $prefix/bin/vsync-probe, $prefix/lib/libvsync.so.0, $prefix/include/vsync/vsync.h, /etc/systemd/system/vsyncd.{service,socket}"

if [ $enable -eq 1 ]; then
  if [ -d /run/systemd/system ]; then
    systemctl daemon-reload
    systemctl enable --now vsyncd.socket
    log "vsyncd.socket enabled: the first client starts vsyncd"
  else
    log "systemd is not running here: start the daemon by hand with '$prefix/bin/vsyncd --socket /run/vsyncd/vsyncd.sock'"
  fi
fi
