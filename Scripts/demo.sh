#!/usr/bin/env bash
# The main job's body: vsyncd on the displays of this machine, with two `vsync-probe follow`
# clients at different rates printing live ticks. Scripts/run.sh runs it here, or inside the
# VM test bed on a machine without a display.
#
#   Scripts/demo.sh BIN_DIR [SECONDS]    # SECONDS 0 = until Ctrl-C
set -euo pipefail
bin=${1:?usage: demo.sh BIN_DIR [SECONDS]}
seconds=${2:-15}
dir=$(mktemp -d /tmp/vsyncd-demo.XXXXXX)
sock="$dir/vsyncd.sock"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -INT "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"$bin/vsyncd" --socket "$sock" --log-level info 2> >(sed -u 's/^/[vsyncd] /' >&2) &
pids+=($!)
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
[ -S "$sock" ] || { echo "demo: vsyncd did not create $sock: see its log above" >&2; exit 1; }

# Two clients: one at the display's full rate, one at a third of it (20 fps at 60 Hz).
frames=()
[ "$seconds" -gt 0 ] && frames=(--frames $((seconds * 60)))
"$bin/vsync-probe" follow --socket "$sock" --fps 0 "${frames[@]}" | sed -u 's/^/[full rate] /' &
pids+=($!)
[ "$seconds" -gt 0 ] && frames=(--frames $((seconds * 20)))
"$bin/vsync-probe" follow --socket "$sock" --fps 20 "${frames[@]}" | sed -u 's/^/[20 fps]    /' &
pids+=($!)
if [ "$seconds" -gt 0 ]; then
  wait "${pids[1]}" "${pids[2]}"
else
  wait
fi
