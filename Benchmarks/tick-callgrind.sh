#!/usr/bin/env bash
# Instructions per vblank in vsyncd's tick path, counted by callgrind (repeatable on a noisy
# machine, where times are not): vsyncd --source timer:240 with N raw-socket clients, counted
# for S seconds from the moment all N are subscribed (before that, under valgrind, the count
# would average over however many had connected yet), then Server.vblank's inclusive
# instructions over its calls, and the whole program's.
#
#   Benchmarks/tick-callgrind.sh [VSYNCD] [N] [SECONDS]   # defaults: .build/release/vsyncd 100 10
#   KEEP=1 Benchmarks/tick-callgrind.sh ...                 # keeps callgrind's output and annotation
#   SAMPLING=sparse Benchmarks/tick-callgrind.sh ...        # vsyncd --vblank-sampling sparse
#
# Compare two builds by running it on each with the same N and SECONDS (the instruction
# counts in docs/PERFORMANCE.md). The timer source does not read DRM: the DRM read path's
# share is not in these counts.
set -u
bin=${1:-.build/release/vsyncd}; n=${2:-100}; secs=${3:-10}; sampling=${SAMPLING:-continuous}
# The raw client: beside VSYNCD if one is there, else the Benchmarks package's release build.
client=$(dirname "$bin")/vsync-bench-client
[ -x "$client" ] || client=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/.build/release/vsync-bench-client
if ! [ -x "$bin" ] || ! [ -x "$client" ]; then
  echo "tick-callgrind: $bin or $client missing: run Scripts/build-release.sh and swift build -c release --package-path Benchmarks" >&2; exit 1
fi
command -v valgrind >/dev/null || { echo "tick-callgrind: valgrind missing: apt-get install valgrind" >&2; exit 1; }
dir=$(mktemp -d /tmp/tick-callgrind.XXXXXX)
sock=$dir/vsyncd.sock
command -v callgrind_control >/dev/null || { echo "tick-callgrind: callgrind_control missing: apt-get install valgrind" >&2; exit 1; }
valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$dir/cg.out" "$bin" --source timer:240 --socket "$sock" \
  --vblank-sampling "$sampling" \
  --max-clients-per-user $((n + 8)) --max-subscriptions-per-user $((2 * n + 8)) >"$dir/vsyncd.log" 2>&1 &
vpid=$!
for _ in $(seq 200); do [ -S "$sock" ] && break; sleep 0.1; done
[ -S "$sock" ] || { echo "tick-callgrind: vsyncd did not listen within 20 s under valgrind: $(tail -n 1 "$dir/vsyncd.log")" >&2; exit 1; }
pids=()
: >"$dir/ready"
for i in $(seq 0 $((n - 1))); do
  # Each client writes its index to the ready file once subscribed (one short write per line).
  VSYNCD_SOCKET=$sock "$client" --index "$i" --mode raw --max-seconds $((secs + 600)) --ready-fd 3 \
    >/dev/null 2>&1 3>>"$dir/ready" &
  pids+=($!)
done
for _ in $(seq 3000); do [ "$(wc -l <"$dir/ready")" -ge "$n" ] && break; sleep 0.1; done
ready=$(wc -l <"$dir/ready")
[ "$ready" -ge "$n" ] || echo "tick-callgrind: only $ready of $n clients subscribed after 300 s: counting with those" >&2
callgrind_control --instr=on "$vpid" >/dev/null 2>&1
sleep "$secs"
kill -INT $vpid; wait $vpid
for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null
a=$dir/annotate.txt
callgrind_annotate --inclusive=yes --tree=caller "$dir/cg.out" >"$a" 2>&1
total=$(grep "PROGRAM TOTALS" "$a" | awk '{gsub(",","",$1); print $1}')
# Server.vblank(_:sequence:timestampNs:): inclusive Ir and calls, summed over its callers.
read -r ir calls < <(grep -E "=> .*6ServerC6vblank_8sequence11timestampNs.*\(" "$a" | sed -E 's/^ *([0-9,]+).*\(([0-9,]+)x\).*/\1 \2/' | tr -d , | awk '{i+=$1; c+=$2} END {print i+0, c+0}')
set -- "$ir" "$calls"
[ "${2:-0}" -gt 0 ] || { echo "tick-callgrind: no Server.vblank calls found (see $a)" >&2; exit 1; }
echo "N $n ($ready subscribed before counting), ${secs} s at 240 Hz, $sampling sampling: Server.vblank $2 calls, $(( $1 / $2 )) Ir per vblank; whole program $(( total / $2 )) Ir per vblank"
# Sparse sampling ticks from the pacing timer (Server.wake, once per frame) and reads vblanks
# only in bursts: there the tick path's figure is Server.wake's, per frame ticked.
if [ "$sampling" = sparse ]; then
  read -r wir wakes < <(grep -E "=> .*6ServerC4wakeyyF.*\(" "$a" | sed -E 's/^ *([0-9,]+).*\(([0-9,]+)x\).*/\1 \2/' | tr -d , | awk '{i+=$1; c+=$2} END {print i+0, c+0}')
  [ "${wakes:-0}" -gt 0 ] && echo "  Server.wake $wakes calls (frames ticked from the model), $(( wir / wakes )) Ir per frame"
fi
if [ -n "${KEEP:-}" ]; then echo "kept $dir"; else rm -rf "$dir"; fi
