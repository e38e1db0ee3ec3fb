#!/usr/bin/env bash
# Vblanks the kernel had and vsyncd never ticked, under CPU load, measured in the VM
# test bed on vkms against the kernel's own record (Tests/vm-tools/kernel-vblank-recorder.c,
# which keeps 16 requests queued ahead and so misses none).
#
#   Benchmarks/vblank-loss.sh [--seconds S] [--load N] [--rounds R] [--hz HZ] BIN_DIR [BIN_DIR...]
#
# Each round boots the VM once per BIN_DIR (alternating, so both see the same host load), runs
# that directory's vsyncd with one full-rate raw client (Tests/TestBed/guest-vsyncd-client.py) beside
# the recorder, with N busy loops competing for the guest's 2 CPUs, for S seconds, and prints
# one line per run: the kernel's vblanks while the client ticked, the ones no tick named (lost),
# and the sum of the ticks' `skipped` (which must count every lost one).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")
seconds=10 load=4 rounds=3 hz=120
dirs=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    --load) load=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --hz) hz=$2; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) dirs+=("$(cd "$1" && pwd)"); shift ;;
  esac
done
[ ${#dirs[@]} -gt 0 ] || { echo "vblank-loss.sh: name at least one build directory holding vsyncd (e.g. .build/release)" >&2; exit 64; }
cd "$repo"
mkdir -p .build/vm-tools
cc -O2 -Wall -Werror -I/usr/include/libdrm Tests/vm-tools/kernel-vblank-recorder.c -ldrm -o .build/vm-tools/kernel-vblank-recorder
tools=$(cd .build/debug && pwd)  # vkms-modeset, from the debug build

guest='. Tests/TestBed/guest-vsyncd-lib.sh
hold '"$hz"' >/dev/null
.build/vm-tools/kernel-vblank-recorder >/tmp/c.kvr.out 2>/tmp/c.kvr.err & PID_kvr=$!; CLIENTS="kvr"
vsyncd_start
raw full 0
wait_ticks full 20
i=0; spin=""; while [ $i -lt '"$load"' ]; do (while :; do :; done) & spin="$spin $!"; i=$((i + 1)); done
sleep '"$seconds"'
kill $spin
stop full TERM; stop kvr TERM; vsyncd_stop; release; dump'

for round in $(seq 1 "$rounds"); do
  for dir in "${dirs[@]}"; do
    out=$(Tests/TestBed/vm-run.sh --timeout $((seconds + 120)) --env VSYNC_BIN="$dir" --env VSYNC_TOOLS="$tools" -- sh -c "$guest" 2>/dev/null)
    printf '%s\n' "$out" | python3 -c '
import json, sys
kernel, ticks = {}, []
for line in sys.stdin:
    if line.startswith("@@kvr "):
        p = line.split()
        if len(p) == 3: kernel.setdefault(int(p[1]), int(p[2]))
    elif line.startswith("@@full {"):
        m = json.loads(line[len("@@full "):])
        if m.get("type") == "tick": ticks.append(m)
if len(ticks) < 2: sys.exit("no ticks: " + sys.argv[1])
seqs = {t["seq"] for t in ticks}
window = [s for s in kernel if ticks[0]["seq"] <= s <= ticks[-1]["seq"]]
lost = sum(1 for s in window if s not in seqs)
skipped = sum(t["skipped"] for t in ticks[1:])
print(f"round {sys.argv[2]}  {sys.argv[1]:<40} kernel vblanks {len(window):6d}  ticked {len(window) - lost:6d}  lost {lost:4d}  skipped {skipped:4d}")
' "$dir" "$round"
  done
done
