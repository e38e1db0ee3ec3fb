#!/usr/bin/env bash
# Wake-ups per second of vsyncd and of one client, continuous against sparse vblank sampling:
# vsyncd --source timer:60 with one client that follows by the timing page only (vsync-probe
# page, a read a second) or by ticks (vsync-probe follow --fps 60). Counts every thread's
# context switches (each a sleep that ended, or a preemption) over SECS after WARM seconds.
#
#   Benchmarks/follow-wakeups.sh [BIN]     # BIN: vsyncd and vsync-probe's directory (.build/release)
#   SECS=15 WARM=5 Benchmarks/follow-wakeups.sh
#
# The timer source has no interrupt to save: what sparse sampling saves here is vsyncd's own
# wake per vblank; on a DRM display it is the vblank interrupt too (docs/PERFORMANCE.md).
set -u
bin=${1:-.build/release} secs=${SECS:-15} warm=${WARM:-5}
for tool in vsyncd vsync-probe; do
  [ -x "$bin/$tool" ] || { echo "follow-wakeups: no $bin/$tool: run Scripts/build-release.sh first" >&2; exit 1; }
done
# Threads may come and go while they are read: one that went is simply not counted.
switches() { cat /proc/"$1"/task/*/status 2>/dev/null | awk '/ctxt_switches/ {s += $2} END {print s + 0}'; }
per_second() { echo "scale=1; ($2 - $1) / $secs" | bc; }
for mode in continuous sparse; do
  for kind in page ticks; do
    dir=$(mktemp -d) && sock=$dir/vsyncd.sock
    "$bin/vsyncd" --source timer:60 --socket "$sock" --vblank-sampling "$mode" --log-level warning 2>"$dir/vsyncd.err" &
    daemon=$!
    for _ in $(seq 200); do [ -S "$sock" ] && break; sleep 0.05; done
    [ -S "$sock" ] || { echo "follow-wakeups: vsyncd did not listen within 10 s: $(tail -n 1 "$dir/vsyncd.err")" >&2; exit 1; }
    if [ "$kind" = page ]; then
      "$bin/vsync-probe" page --socket "$sock" --interval 1000 >/dev/null 2>&1 &
    else
      "$bin/vsync-probe" follow --socket "$sock" --fps 60 >/dev/null 2>&1 &
    fi
    client=$!
    sleep "$warm"
    d0=$(switches $daemon) c0=$(switches $client)
    sleep "$secs"
    d1=$(switches $daemon) c1=$(switches $client)
    echo "$mode, $kind client: vsyncd $(per_second "$d0" "$d1") wake-ups/s, client $(per_second "$c0" "$c1") wake-ups/s"
    kill $client $daemon 2>/dev/null
    wait $client $daemon 2>/dev/null
    rm -rf "$dir"
  done
done
