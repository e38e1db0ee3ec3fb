#!/usr/bin/env bash
# Builds (once) the small kernel with vkms that the VM test bed boots, and prints its path.
#
# Debian's packaged kernels have no vkms, and bookworm's 6.1 vkms has one CRTC and no configfs.
# So we build Debian's newest linux-source-7.x (sid, trixie-backports): `make tinyconfig` plus
# Tests/TestBed/kernel.config. The source package comes through a PRIVATE apt state under the cache
# (its own lists, sources and archives): the machine's apt configuration is never changed, and
# the repository URIs are copied at run time from the machine's own apt sources, so no host is
# named here. The .deb, its tarball and the built bzImage are cached, the kernel keyed by a hash
# of the config's options, the package version and the compiler, so a second run is instant and offline.
#
#   Tests/TestBed/build-kernel.sh            # prints /var/cache/vsyncd/kernel-<hash>/bzImage
#   VSYNCD_CACHE=/some/dir Tests/TestBed/build-kernel.sh
#   VSYNCD_KERNEL_REFRESH=1 ...        # re-read the suites' package lists (a newer 7.x, if any)
#   VSYNCD_KERNEL_SUITES="sid"         # where to look (default: "sid trixie-backports")
#   VSYNCD_KERNEL_PACKAGE=linux-source-7.2   # this package instead of the newest linux-source-7.*
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=Scripts/lib.sh
. "$here/../../Scripts/lib.sh"

ensure_packages apt gpgv debian-archive-keyring bc flex bison libelf-dev libssl-dev xz-utils make gcc
cache=${VSYNCD_CACHE:-/var/cache/vsyncd}
apt_dir="$cache/apt"
mkdir -p "$apt_dir/lists/partial" "$apt_dir/sources" "$apt_dir/archives/partial" "$apt_dir/cache" "$cache/src"
# apt downloads as its sandbox user where it can write.
id _apt >/dev/null 2>&1 && chown -R _apt:root "$apt_dir/lists/partial" "$apt_dir/archives"
# Two builders (two test processes asking at once) share one apt state and one build.
exec 9>"$cache/.kernel-build.lock"
flock 9

# The Debian mirror URIs this machine already uses (deb822 .sources, then one-line sources.list
# entries), for its Debian archive only: not -security, not third-party repositories.
mirror_uris() {
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk 'BEGIN{RS=""; IGNORECASE=1}
      /(^|\n)Types:[^\n]*deb/ && /debian-archive-keyring|(^|\n)URIs:[^\n]*\/debian\/?(\n|$| )/ {
        n = split($0, L, "\n"); uris = ""; suites = ""
        for (i = 1; i <= n; i++) {
          if (L[i] ~ /^URIs:/) uris = substr(L[i], 6)
          if (L[i] ~ /^Suites:/) suites = substr(L[i], 8)
        }
        if (suites !~ /-security/) print uris
      }' "$f"
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    sed -E 's/\[[^]]*\]//' "$f" | awk '$1 == "deb" && $3 !~ /-security/ && $2 ~ /\/debian\/?$/ { print $2 }'
  done
}

write_sources() {
  local uris
  uris=$(mirror_uris | tr ' ' '\n' | grep . | awk '!seen[$0]++' | tr '\n' ' ')
  [ -n "$uris" ] || die "no Debian archive URI in /etc/apt/sources.list{,.d}: add the machine's Debian mirror to apt's sources"
  cat > "$apt_dir/sources/vsyncd-kernel.sources" <<EOF
# Written by Tests/TestBed/build-kernel.sh: URIs copied from this machine's apt sources.
Types: deb
URIs: $uris
Suites: ${VSYNCD_KERNEL_SUITES:-sid trixie-backports}
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
}

private_apt() {
  apt-get -q \
    -oDir::State::Lists="$apt_dir/lists" \
    -oDir::Etc::SourceList=/dev/null \
    -oDir::Etc::SourceParts="$apt_dir/sources" \
    -oDir::Cache="$apt_dir/cache" \
    -oDir::Cache::Archives="$apt_dir/archives" \
    -oAcquire::Languages=none \
    -oAPT::Get::List-Cleanup=true \
    "$@"
}

refresh_lists() {
  write_sources
  log "reading package lists of ${VSYNCD_KERNEL_SUITES:-sid trixie-backports} (private apt state in $apt_dir)"
  private_apt update >&2 || die "apt-get update of the private kernel-source lists failed: check the network and $apt_dir/sources"
}

# The newest linux-source-7.* the lists offer: "package version".
newest_source() {
  if [ -n "${VSYNCD_KERNEL_PACKAGE:-}" ]; then
    echo "$VSYNCD_KERNEL_PACKAGE $(private_apt_cache policy "$VSYNCD_KERNEL_PACKAGE" 2>/dev/null | awk '/Candidate:/ {print $2}')"
    return
  fi
  local p v
  for p in $(private_apt_cache pkgnames linux-source-7. 2>/dev/null | sort -u); do
    v=$(private_apt_cache policy "$p" 2>/dev/null | awk '/Candidate:/ {print $2}')
    [ -n "$v" ] && [ "$v" != "(none)" ] && echo "$p $v"
  done | sort -k2,2V | tail -n1
}
private_apt_cache() {
  apt-cache \
    -oDir::State::Lists="$apt_dir/lists" \
    -oDir::Etc::SourceList=/dev/null \
    -oDir::Etc::SourceParts="$apt_dir/sources" \
    -oDir::Cache="$apt_dir/cache" \
    "$@"
}

if [ -n "${VSYNCD_KERNEL_REFRESH:-}" ] || [ ! -s "$apt_dir/sources/vsyncd-kernel.sources" ] \
   || ! ls "$apt_dir/lists/"*_Packages* >/dev/null 2>&1; then
  refresh_lists
fi
read -r pkg version < <(newest_source) || true

# The cache key: the options the kernel is built with (not kernel.config's comments), the
# source's version and the compiler, so a reworded comment does not cost a rebuild.
kernel_key() {
  { grep -v '^#' "$here/kernel.config" | grep .; echo "$pkg $version"; gcc --version | head -n1; } | sha256sum | cut -c1-16
}
[ -n "${pkg:-}" ] && [ -n "${version:-}" ] || die "no linux-source-7.x in ${VSYNCD_KERNEL_SUITES:-sid trixie-backports}: set VSYNCD_KERNEL_SUITES or VSYNCD_KERNEL_PACKAGE"

key=$(kernel_key)
out="$cache/kernel-$key"
if [ -s "$out/bzImage" ]; then
  echo "$out/bzImage"
  exit 0
fi

# The source tarball, cached by package version (the .deb is dropped once it is unpacked).
tarball=$(ls "$cache/src/${pkg}_$version"/usr/src/linux-source-*.tar.xz 2>/dev/null | head -n1 || true)
if [ -z "$tarball" ]; then
  deb=$(ls "$apt_dir/archives/$pkg"_*.deb 2>/dev/null | head -n1 || true)
  if [ -z "$deb" ]; then
    log "downloading $pkg $version"
    if ! (cd "$apt_dir/archives" && private_apt download "$pkg=$version" >&2); then
      # Lists older than the archive name a version no longer there: re-read them once.
      refresh_lists
      read -r pkg version < <(newest_source)
      (cd "$apt_dir/archives" && private_apt download "$pkg=$version" >&2) \
        || die "apt-get download $pkg failed: check the network"
      key=$(kernel_key)
      out="$cache/kernel-$key"
    fi
    deb=$(ls "$apt_dir/archives/$pkg"_*.deb | head -n1)
  fi
  dest="$cache/src/${pkg}_$version"
  rm -rf "$dest.tmp"; mkdir -p "$dest.tmp"
  dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$dest.tmp" --wildcards './usr/src/linux-source-*.tar.xz' \
    || die "$deb holds no usr/src/linux-source-*.tar.xz"
  rm -rf "$dest"; mv "$dest.tmp" "$dest"; rm -f "$deb"
  tarball=$(ls "$dest"/usr/src/linux-source-*.tar.xz | head -n1)
fi

work="$cache/build-$key"
rm -rf "$work"; mkdir -p "$work"
log "unpacking $tarball"
tar -xf "$tarball" -C "$work"
src=$(ls -d "$work"/linux-source-*)
cd "$src"
log "configuring $pkg $version (tinyconfig + Tests/TestBed/kernel.config)"
make -s tinyconfig >/dev/null
grep -v '^#' "$here/kernel.config" | grep . > .config.extra
./scripts/kconfig/merge_config.sh -m .config .config.extra >/dev/null
make -s olddefconfig >/dev/null
# merge_config quietly drops options whose dependencies are unmet: refuse such a kernel.
unset_options=0
while IFS= read -r line; do
  if ! grep -qx "$line" .config; then echo "kernel option not set: $line" >&2; unset_options=1; fi
done < .config.extra
[ "$unset_options" -eq 0 ] || die "kernel config incomplete: fix Tests/TestBed/kernel.config"
jobs=$(( $(nproc) + 1 ))
log "building bzImage with -j$jobs (about 10 minutes on 2 cores)"
started=$SECONDS
if ! make -s -j"$jobs" bzImage > "$work/build.log" 2>&1; then
  tail -n 30 "$work/build.log" >&2
  die "kernel build failed: full log in $work/build.log"
fi
mkdir -p "$out.tmp"
cp arch/x86/boot/bzImage "$out.tmp/bzImage"
cp .config "$out.tmp/config"
echo "$pkg $version" > "$out.tmp/version"
rm -rf "$out"; mv "$out.tmp" "$out"
cd /; rm -rf "$work"
log "kernel $pkg $version built in $((SECONDS - started)) s, cached at $out"
echo "$out/bzImage"
