#!/usr/bin/env bash
# Builds the Debian packages into out/deb (or --out DIR) and checks them with lintian:
#   vsyncd          the daemon, vsync-probe, the units, the man pages and the docs (no Swift needed)
#   libvsync1       libvsync.so.1 (needs only libc)
#   libvsync-dev    the headers (vsync.h and the GLib and Qt adapters), their .pc files, the
#                   libvsync.so link and libvsync(3)
# plus their -dbgsym packages (the debug info stripped from the binaries).
#
#   Scripts/package.sh [--out DIR] [--no-lintian]
#
# Why dpkg-buildpackage over debian/ rather than dpkg-deb over a staged tree: debhelper writes
# the maintainer scripts the Debian way (dh_installsystemd's deb-systemd-helper and
# deb-systemd-invoke blocks), computes Depends from the binaries (dpkg-shlibdeps), checks
# libvsync's exports against debian/libvsync1.symbols, strips into -dbgsym packages and installs
# the man pages and docs as every other package does, and lintian knows what it made. The Swift
# toolchain is not a Debian package, so it is checked on PATH instead of in Build-Depends.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")
# shellcheck source=Scripts/lib.sh
. "$here/lib.sh"

out="$repo/out/deb" lint=1
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$(mkdir -p "$2" && cd "$2" && pwd); shift 2 ;;
    --no-lintian) lint=0; shift ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1': see --help" ;;
  esac
done

ensure_packages debhelper dpkg-dev libdrm-dev pkg-config lintian
command -v swift >/dev/null || die "swift not found: install Swift 6.1 or newer (https://swift.org/install) and put it on PATH"
cd "$repo"
version=$(dpkg-parsechangelog -S Version)
code=$(sed -n 's/.*static let string = "\(.*\)".*/\1/p' Sources/VsyncCore/Version.swift)
[ "$version" = "$code" ] || die "debian/changelog says $version but VsyncVersion.string is $code: add a changelog entry (dch -v $code)"

# dpkg-buildpackage writes its results beside the checkout: collect them from there.
parent=$(dirname "$repo")
arch=$(dpkg-architecture -qDEB_HOST_ARCH)
changes="$parent/vsyncd_${version}_${arch}.changes"
rm -f "$changes"
log "dpkg-buildpackage (a release build: a few minutes the first time)"
dpkg-buildpackage -b -us -uc >&2 || die "dpkg-buildpackage failed: its output is above"
mkdir -p "$out"
rm -f "$out"/*.deb "$out"/*.ddeb
files=$(sed -n '/^Files:/,/^[A-Z]/{s/^ [0-9a-f]\{32\} [0-9]* [^ ]* [^ ]* //p}' "$changes")
for f in $files; do mv "$parent/$f" "$out/"; done
mv "$changes" "$out/"
rm -f "$parent/vsyncd_${version}_${arch}.buildinfo"
# dh clean: leave no build residue in debian/.
debian/rules clean >/dev/null 2>&1 || true

if [ $lint -eq 1 ]; then
  log "lintian (each override in debian/*.lintian-overrides says why)"
  lintian --fail-on error,warning --display-info --show-overrides "$out"/*.deb >&2 \
    || die "lintian found errors or warnings in $out: fix them, or override one with its reason"
fi
log "packages in $out:"
ls -1 "$out"/*.deb | sed 's/^/  /' >&2
