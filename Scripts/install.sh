#!/usr/bin/env bash
# Builds a release of vsyncd and installs the binaries, the systemd units, the man pages, the
# DisplayLink library and libvsync (the C library, its headers and .pc files), then (unless
# --no-enable) enables and starts vsyncd.socket.
#
#   sudo Scripts/install.sh [--prefix /usr/local] [--libdir DIR] [--unit-dir DIR] [--destdir DIR]
#                           [--bin-dir DIR] [--no-swift-library] [--no-enable]
#
# --libdir: where libraries go (default PREFIX/lib; the Debian package uses the multiarch one).
# --unit-dir: where the units go (default /etc/systemd/system; the package uses /lib/systemd/system).
# --destdir stages the files under DIR (for packaging and for tests) and implies --no-enable.
# --bin-dir installs binaries already built there (e.g. .build/debug) instead of building a release.
# --no-swift-library leaves out the Swift DisplayLink library (it needs the Swift runtime).
# vsyncd and vsync-probe are built with the Swift standard library linked in: they run on a
# machine without a Swift toolchain (they need libdrm, libstdc++ and libc).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")
# shellcheck source=Scripts/lib.sh
. "$here/lib.sh"

prefix=/usr/local libdir="" unitdir=/etc/systemd/system destdir="" enable=1 bin="" swiftlib=1
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix=$2; shift 2 ;;
    --libdir) libdir=$2; shift 2 ;;
    --unit-dir) unitdir=$2; shift 2 ;;
    --destdir) destdir=$2; enable=0; shift 2 ;;
    --no-enable) enable=0; shift ;;
    --bin-dir) bin=$(cd "$2" && pwd); shift 2 ;;
    --no-swift-library) swiftlib=0; shift ;;
    -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1': see --help" ;;
  esac
done
libdir=${libdir:-$prefix/lib}

cd "$repo"
if [ -z "$bin" ]; then
  ensure_packages libdrm-dev pkg-config
  "$here/build-release.sh" >&2
  bin=$(swift build -c release --show-bin-path)
fi
for f in vsyncd vsync-probe; do
  [ -x "$bin/$f" ] || die "no $bin/$f: build it first ('swift build -c release')"
done

root="$destdir$prefix" lib="$destdir$libdir" units="$destdir$unitdir"
install -d "$root/bin" "$lib" "$root/share/doc/vsyncd" "$units" \
  "$root/share/man/man1" "$root/share/man/man3" "$root/share/man/man8"
install -m 0755 "$bin/vsyncd" "$bin/vsync-probe" "$root/bin/"
install -m 0644 docs/man/vsyncd.8 "$root/share/man/man8/"
install -m 0644 docs/man/vsync-probe.1 "$root/share/man/man1/"
# The client library for apps built outside SwiftPM: the shared library and its modules
# (swiftc -I LIBDIR/swift/vsyncd -L LIBDIR -lDisplayLinkShared). SwiftPM users depend
# on this package's DisplayLink product instead.
if [ $swiftlib -eq 1 ] && [ -e "$bin/libDisplayLinkShared.so" ]; then
  install -m 0755 "$bin/libDisplayLinkShared.so" "$lib/"
  install -d "$lib/swift/vsyncd"
  for m in DisplayLink VsyncClientCore VsyncCore; do
    for ext in swiftmodule swiftdoc swiftinterface; do
      [ -e "$bin/Modules/$m.$ext" ] && install -m 0644 "$bin/Modules/$m.$ext" "$lib/swift/vsyncd/"
    done
  done
  # The client core's libc shim, the timing page's header and the hang detector's capture
  # header: the compiler loads them with VsyncClientCore's and DisplayLink's modules (their
  # code is in the library).
  install -d "$lib/swift/vsyncd/CVsyncSys" "$lib/swift/vsyncd/CVsyncPage" "$lib/swift/vsyncd/CVsyncHang"
  install -m 0644 Sources/CVsyncSys/module.modulemap Sources/CVsyncSys/shim.h "$lib/swift/vsyncd/CVsyncSys/"
  install -m 0644 Sources/CVsyncPage/module.modulemap Sources/CVsyncPage/vsync_page.h "$lib/swift/vsyncd/CVsyncPage/"
  install -m 0644 Sources/CVsyncHang/include/module.modulemap Sources/CVsyncHang/include/vsync_hang.h "$lib/swift/vsyncd/CVsyncHang/"
elif [ $swiftlib -eq 1 ]; then
  log "no libDisplayLinkShared.so in $bin: library not installed (build it with 'swift build --product DisplayLinkShared')"
fi
# libvsync, for C, C++, Rust and Python: the real file, its SONAME link and the development
# link, the headers, vsync.pc (cc app.c $(pkg-config --cflags --libs vsync)) and libvsync(3).
if [ -e "$bin/libvsync.so" ]; then
  version=$(sed -n 's/.*static let string = "\(.*\)".*/\1/p' Sources/VsyncCore/Version.swift)
  install -d "$root/include/vsync" "$lib/pkgconfig"
  # The file is named for the library's ABI (SONAME major 1, then minor.micro: the minor goes
  # up with a release that appends calls), not for the release; the release goes in vsync.pc.
  install -m 0644 "$bin/libvsync.so" "$lib/libvsync.so.1.0.0"
  ln -sfn libvsync.so.1.0.0 "$lib/libvsync.so.1"
  ln -sfn libvsync.so.1 "$lib/libvsync.so"
  # The main-loop adapters are headers only (a GLib source, a Qt animation driver), so the
  # library needs neither GLib nor Qt; vsync-glib.pc and vsync-qt.pc add them to vsync's flags.
  install -m 0644 include/vsync/vsync.h include/vsync/vsync-glib.h include/vsync/vsync-qt.h "$root/include/vsync/"
  for pc in vsync vsync-glib vsync-qt; do
    sed -e "s|@PREFIX@|$prefix|" -e "s|@LIBDIR@|$libdir|" -e "s|@INCLUDEDIR@|$prefix/include|" \
        -e "s|@VERSION@|$version|" "Sources/libvsync/$pc.pc.in" > "$lib/pkgconfig/$pc.pc"
  done
  install -m 0644 docs/LIBVSYNC.md "$root/share/doc/vsyncd/"
  install -m 0644 docs/man/libvsync.3 "$root/share/man/man3/"
  [ -z "$destdir" ] && command -v ldconfig >/dev/null && ldconfig
else
  log "no libvsync.so in $bin: libvsync not installed (build it with 'swift build --product vsync')"
fi
install -m 0644 README.md docs/PROTOCOL.md "$root/share/doc/vsyncd/"
# The units name the install's own paths.
for unit in vsyncd.service vsyncd.socket; do
  sed "s|/usr/local/|$prefix/|g" "systemd/$unit" > "$units/$unit"
  chmod 0644 "$units/$unit"
done
log "installed under ${destdir:-/}${destdir:+ (staged)}: $prefix/bin/vsyncd, $prefix/bin/vsync-probe, $libdir/libvsync.so.1, $prefix/include/vsync/vsync.h, $unitdir/vsyncd.{service,socket}, man pages"

if [ $enable -eq 1 ]; then
  if [ -d /run/systemd/system ]; then
    systemctl daemon-reload
    systemctl enable --now vsyncd.socket
    log "vsyncd.socket enabled: the first client starts vsyncd"
  else
    log "systemd is not running here: start the daemon by hand with '$prefix/bin/vsyncd --socket /run/vsyncd/vsyncd.sock'"
  fi
fi
