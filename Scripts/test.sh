#!/usr/bin/env bash
# The whole test suite: installs what it needs, builds the vkms kernel for the VM test bed
# (cached in /var/cache/vsyncd), builds everything (the Benchmarks package too, for the soak)
# and the Debian packages (checked by lintian), and runs unit, daemon, package and VM tests,
# then libvsync's Rust crate and Python package (Scripts/test-bindings.sh: cargo test
# --offline, pytest in a fresh virtualenv), after the linters (Scripts/lint.sh).
#
#   Scripts/test.sh            # everything
#   Scripts/test.sh --filter X # only tests matching X (passed to `swift test`), no linters
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")
# shellcheck source=Scripts/lib.sh
. "$here/lib.sh"
cd "$repo"

ensure_packages pkg-config libdrm-dev libdrm-tests qemu-system-x86 systemd g++ binutils util-linux \
  gpgv debian-archive-keyring bc flex bison libelf-dev libssl-dev xz-utils make gcc \
  debhelper dpkg-dev lintian groff-base acl bubblewrap protobuf-compiler \
  libglib2.0-dev qt6-base-dev qt6-declarative-dev qml6-module-qtquick qml6-module-qtqml \
  qml6-module-qtqml-workerscript
command -v swift >/dev/null || die "swift not found: install Swift 6.1 or newer (https://swift.org/install) and put it on PATH"

# Every part runs even if one before it failed; the script fails if any did.
status=0
if [ $# -eq 0 ]; then
  log "linters (Scripts/lint.sh: shellcheck and swift format lint)"
  "$here/lint.sh" || status=$?
fi

log "kernel for the VM test bed (Debian's newest linux-source-7.x, fetched with a private apt state)"
kernel=$("$here/../Tests/TestBed/build-kernel.sh")
log "kernel: $kernel"

log "building"
swift build --build-tests
# The soak (SoakTests runs vsync-soak) is in the benchmarks' own package.
swift build --package-path Benchmarks

# The packages' own tests (PackageTests) and the VM's systemd test install them.
log "Debian packages (Scripts/package.sh: a static release build, then lintian)"
"$here/package.sh" --out "$repo/out/deb"
# FrameFaultsVMTests runs its app (a test bed helper, no product) from the release build too:
# under TCG a debug build of the client library and its hang detector measures the build.
swift build -c release --product frame-faults-app

if [ $# -eq 0 ]; then
  log "short fuzz run of both protocol decoders (the full run: Scripts/fuzz.sh)"
  "$here/fuzz.sh" --runs 20000
fi

log "running tests"
# One test at a time: the VM, soak and latency tests measure timing, and on 2 cores parallel
# suites would measure each other instead.
swift test --skip-build --no-parallel "$@" || status=$?

if [ $# -eq 0 ]; then
  log "libvsync's bindings: Rust and Python"
  "$here/test-bindings.sh" || status=$?
fi
exit "$status"
