#!/usr/bin/env bash
# Builds (once) the small kernel with vkms that the VM test bed boots, and prints its path.
#
# Debian's packaged kernels have no vkms, so we build one from Debian's linux-source-6.1:
# `make tinyconfig` plus Scripts/kernel.config. The result is cached outside the checkout,
# keyed by a hash of the config and the source tarball's version, so a second run is instant.
#
#   Scripts/build-kernel.sh            # prints /var/cache/vsyncd/kernel-<hash>/bzImage
#   VSYNCD_CACHE=/some/dir Scripts/build-kernel.sh
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=Scripts/lib.sh
. "$here/lib.sh"

ensure_packages linux-source-6.1 bc flex bison libelf-dev libssl-dev xz-utils make gcc
tarball=$(ls /usr/src/linux-source-6.1*.tar.xz 2>/dev/null | head -n1)
[ -n "$tarball" ] || die "no /usr/src/linux-source-6.1*.tar.xz after installing linux-source-6.1: check apt"
version=$(dpkg-query -W -f='${Version}' linux-source-6.1)
key=$( { cat "$here/kernel.config"; echo "$version"; } | sha256sum | cut -c1-16)
cache=${VSYNCD_CACHE:-/var/cache/vsyncd}
out="$cache/kernel-$key"
if [ -s "$out/bzImage" ]; then
  echo "$out/bzImage"
  exit 0
fi
mkdir -p "$cache"
# One builder at a time: tests may ask for the kernel concurrently.
exec 9>"$cache/.kernel-build.lock"
flock 9
if [ -s "$out/bzImage" ]; then echo "$out/bzImage"; exit 0; fi

work="$cache/build-$key"
rm -rf "$work"; mkdir -p "$work"
log "unpacking $tarball"
tar -xf "$tarball" -C "$work"
src=$(ls -d "$work"/linux-source-6.1*)
cd "$src"
log "configuring (tinyconfig + Scripts/kernel.config)"
make -s tinyconfig >/dev/null
grep -v '^#' "$here/kernel.config" | grep . > .config.extra
./scripts/kconfig/merge_config.sh -m .config .config.extra >/dev/null
make -s olddefconfig >/dev/null
# merge_config quietly drops options whose dependencies are unmet: refuse such a kernel.
missing=0
while IFS= read -r line; do
  if ! grep -qx "$line" .config; then echo "kernel option not set: $line" >&2; missing=1; fi
done < .config.extra
[ $missing -eq 0 ] || die "kernel config incomplete: fix Scripts/kernel.config"
jobs=$(( $(nproc) + 1 ))
log "building bzImage with -j$jobs (about 5 minutes on 2 cores)"
if ! make -s -j"$jobs" bzImage > "$work/build.log" 2>&1; then
  tail -n 30 "$work/build.log" >&2
  die "kernel build failed: full log in $work/build.log"
fi
mkdir -p "$out.tmp"
cp arch/x86/boot/bzImage "$out.tmp/bzImage"
cp .config "$out.tmp/config"
rm -rf "$out"; mv "$out.tmp" "$out"
cd /; rm -rf "$work"
log "kernel cached at $out"
echo "$out/bzImage"
