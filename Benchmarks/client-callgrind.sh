#!/usr/bin/env bash
# Instructions per tick in libvsync's client, counted by callgrind (repeatable on a noisy
# machine, where times are not): Benchmarks/libvsync-client.c (vsync_client_dispatch(-1) in a
# loop, as vsync-bench --client-mode c runs it) against vsyncd --source timer:240 for S seconds;
# vsync_client_dispatch's inclusive instructions over its calls (one tick each).
#
#   Benchmarks/client-callgrind.sh [BUILD_DIR] [SECONDS]   # defaults: .build/release 8
#   KEEP=1 Benchmarks/client-callgrind.sh ...              # keeps callgrind's output and annotation
#
# The library is copied with its debug info stripped: valgrind 3.19 cannot read the DWARF the
# Swift 6.3 toolchain writes. Compare two builds by running it on each.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")
build=${1:-$repo/.build/release}; secs=${2:-8}
if ! [ -x "$build/vsyncd" ] || ! [ -e "$build/libvsync.so" ]; then echo "client-callgrind: $build/vsyncd or libvsync.so missing: run Scripts/build-release.sh" >&2; exit 1; fi
command -v valgrind >/dev/null || { echo "client-callgrind: valgrind missing: apt-get install valgrind" >&2; exit 1; }
dir=$(mktemp -d /tmp/client-callgrind.XXXXXX)
soname=$(readelf -d "$build/libvsync.so" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
cp "$build/libvsync.so" "$dir/${soname:-libvsync.so.1}"
strip --strip-debug "$dir/${soname:-libvsync.so.1}"
ln -s "${soname:-libvsync.so.1}" "$dir/libvsync.so"
cc -O2 -g -I "$repo/include" -o "$dir/client" "$here/libvsync-client.c" -L "$dir" -lvsync -Wl,-rpath,"$dir"
sock=$dir/vsyncd.sock
"$build/vsyncd" --source timer:240 --socket "$sock" --log-level warning &
vpid=$!
for _ in $(seq 200); do [ -S "$sock" ] && break; sleep 0.05; done
# The client's fd 3 takes its "first frame" line; --max-seconds ends it.
VSYNCD_SOCKET=$sock valgrind --tool=callgrind --callgrind-out-file="$dir/cg.out" "$dir/client" --index 0 \
  --max-seconds "$secs" 3>/dev/null >/dev/null 2>"$dir/valgrind.log"
kill $vpid; wait $vpid 2>/dev/null
a=$dir/annotate.txt
callgrind_annotate --inclusive=yes --tree=caller "$dir/cg.out" >"$a" 2>&1
# vsync_client_dispatch (the exported C symbol), called from the client's main loop.
read -r ir calls < <(grep -E "< .*libvsync-client.c:main .*\(([0-9,]+)x\)" "$a" | sed -E 's/^ *([0-9,]+).*\(([0-9,]+)x\).*/\1 \2/' | tr -d , |
  sort -n | tail -1)
set -- "${ir:-0}" "${calls:-0}"
[ "${2:-0}" -gt 0 ] || { echo "client-callgrind: no vsync_client_dispatch calls found (see $a)" >&2; exit 1; }
echo "${secs} s at 240 Hz: vsync_client_dispatch $2 calls, $(( $1 / $2 )) Ir per call"
if [ -n "${KEEP:-}" ]; then echo "kept $dir"; else rm -rf "$dir"; fi
