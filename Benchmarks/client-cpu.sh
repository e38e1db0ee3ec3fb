#!/usr/bin/env bash
# Client CPU per tick for each kind of client, against one vsyncd on the timer source, next to
# the C floor's client (fanout.c's blocking recv loop), in alternating rounds on the same machine.
# A figure is the client process's CPU time, every thread's (/proc/PID/task/*/schedstat, ns),
# over a window, divided by the ticks due in that window; the median over the rounds is shown.
#
#   Benchmarks/client-cpu.sh [--rate HZ] [--seconds S] [--rounds N] [--build DIR] [--kinds LIST]
#                            [--vsyncd PATH]
#
# DIR (default .build/release) is the product package's build (vsyncd, libvsync.so:
# Scripts/build-release.sh); vsync-bench-client comes from this package's release build,
# Benchmarks/.build/release (`swift build -c release --package-path Benchmarks`).
#
# Kinds: callback (DisplayLink on a queue), direct (DisplayLink.start()), raw (a Swift blocking
# recv loop), c (libvsync's dispatch(-1) loop, when DIR has libvsync.so), floor (C). --kinds
# picks some ("c,floor": only libvsync and the floor, which need no vsync-bench-client); --vsyncd
# takes the daemon from elsewhere (its CPU is not measured, only the client's).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")
rate=240 seconds=5 rounds=3 build="$repo/.build/release" tools="$here/.build/release" kinds_arg="floor,callback,direct,raw,c" vsyncd=""
while [ $# -gt 0 ]; do
  case "$1" in
    --rate) rate=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --kinds) kinds_arg=$2; shift 2 ;;
    --vsyncd) vsyncd=$2; shift 2 ;;
    *) echo "client-cpu: unknown option '$1' (--rate HZ, --seconds S, --rounds N, --build DIR, --kinds LIST, --vsyncd PATH)" >&2; exit 64 ;;
  esac
done
IFS=, read -r -a wanted <<< "$kinds_arg"
vsyncd=${vsyncd:-$build/vsyncd}
needs=("$vsyncd")
for k in "${wanted[@]}"; do case "$k" in callback|direct|raw) needs+=("$tools/vsync-bench-client") ;; esac; done
for bin in "${needs[@]}"; do
  [ -x "$bin" ] || { echo "client-cpu: $bin missing: run 'swift build -c release' and 'swift build -c release --package-path Benchmarks' first" >&2; exit 1; }
done
work=$(mktemp -d /tmp/client-cpu.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]+"${pids[@]}"}"; do kill -9 "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
cc -O2 -o "$work/fanout" "$repo/Benchmarks/reference/fanout.c"
# libvsync's client, built as vsync-bench builds it, when the library is there.
cclient=""
if [ -e "$build/libvsync.so" ]; then
  mkdir -p "$work/lib"
  # Found at run time by its SONAME, as an installed library is.
  soname=$(readelf -d "$build/libvsync.so" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
  ln -s "$build/libvsync.so" "$work/lib/${soname:-libvsync.so.1}"
  ln -s "$build/libvsync.so" "$work/lib/libvsync.so"
  cc -O2 -I "$repo/include" -o "$work/libvsync-client" "$here/libvsync-client.c" -L "$work/lib" -lvsync -Wl,-rpath,"$work/lib"
  cclient="$work/libvsync-client"
fi

sock="$work/vsyncd.sock"
"$vsyncd" --source "timer:$rate" --socket "$sock" --log-level warning &
pids+=($!)
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.05; done

# CPU ns of every thread of $1 so far.
cpu_ns() { local t s=0; for t in /proc/"$1"/task/*/schedstat; do read -r ns _ < "$t" && s=$((s + ns)); done; echo "$s"; }

# Measures one running client process: µs per tick over the window.
measure() {
  local pid=$1 a b
  sleep 1.5
  a=$(cpu_ns "$pid")
  sleep "$seconds"
  b=$(cpu_ns "$pid")
  awk -v d=$((b - a)) -v t=$((seconds * rate)) 'BEGIN { printf "%.1f", d / t / 1000 }'
}

run_kind() {
  local kind=$1 pid
  case "$kind" in
    callback|direct|raw)
      local mode=$kind; [ "$kind" = callback ] && mode=tick
      VSYNCD_SOCKET="$sock" "$tools/vsync-bench-client" --index 0 --mode "$mode" --socket "$sock" --ready-fd 3 --max-seconds 60 3>/dev/null >/dev/null &
      pid=$! ;;
    c)
      VSYNCD_SOCKET="$sock" "$cclient" --index 0 --max-seconds 60 3>/dev/null >/dev/null 2>&1 &
      pid=$! ;;
    floor)
      "$work/fanout" --clients 1 --rate "$rate" --seconds $((seconds + 4)) >/dev/null &
      local parent=$!
      pids+=("$parent")
      sleep 0.5
      pid=$(pgrep -P "$parent" | head -n 1) ;;
  esac
  pids+=("$pid")
  measure "$pid"
  kill -9 "$pid" 2>/dev/null || true
  [ "$kind" = floor ] && { kill "${pids[-2]}" 2>/dev/null || true; wait "${pids[-2]}" 2>/dev/null || true; }
  wait "$pid" 2>/dev/null || true
}

kinds=()
for k in "${wanted[@]}"; do
  case "$k" in
    floor|callback|direct|raw) kinds+=("$k") ;;
    c) [ -n "$cclient" ] && kinds+=(c) || echo "client-cpu: no $build/libvsync.so: kind c skipped" >&2 ;;
    *) echo "client-cpu: unknown kind '$k' (floor, callback, direct, raw, c)" >&2; exit 64 ;;
  esac
done
declare -A results
for round in $(seq "$rounds"); do
  # Alternate the order, so the machine's drift hits every kind alike.
  order=("${kinds[@]}")
  if [ $((round % 2)) -eq 0 ]; then order=(); for ((i=${#kinds[@]}-1; i>=0; i--)); do order+=("${kinds[i]}"); done; fi
  for kind in "${order[@]}"; do
    v=$(run_kind "$kind")
    results[$kind]="${results[$kind]:-} $v"
    echo "round $round: $kind $v µs/tick" >&2
  done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -n | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else printf "%.1f", (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
floor=$(echo "${results[floor]}" | median)
echo "client CPU per tick at $rate Hz, one client, median of $rounds rounds of $seconds s:"
printf '| client | µs/tick | × C floor |\n| --- | ---: | ---: |\n'
for kind in "${kinds[@]}"; do
  m=$(echo "${results[$kind]}" | median)
  printf '| %s | %s | %s |\n' "$kind" "$m" "$(awk -v a="$m" -v b="$floor" 'BEGIN { printf "%.2f", a / b }')"
done
