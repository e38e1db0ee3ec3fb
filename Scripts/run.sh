#!/usr/bin/env bash
# The main job: vsyncd with two clients showing live ticks, on the real display when this
# machine has one, otherwise inside the vkms VM test bed.
#
#   Scripts/run.sh [--seconds N] [--vm]     # N = 0 runs until Ctrl-C (default 15)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")
# shellcheck source=Scripts/lib.sh
. "$here/lib.sh"

seconds=15 force_vm=0
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    --vm) force_vm=1; shift ;;
    -h|--help) sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1': see --help" ;;
  esac
done

ensure_packages pkg-config libdrm-dev
command -v swift >/dev/null || die "swift not found: install Swift 6.1 or newer and put it on PATH"
cd "$repo"
log "building vsyncd and vsync-probe"
swift build --product vsyncd >&2
swift build --product vsync-probe >&2
bin=$(swift build --show-bin-path)

if [ $force_vm -eq 0 ] && "$bin/vsync-probe" list >/dev/null 2>&1 \
   && "$bin/vsync-probe" measure --frames 2 >/dev/null 2>&1; then
  log "using this machine's display"
  exec "$here/demo.sh" "$bin" "$seconds"
fi
log "no active display with vblank here: running inside the vkms VM test bed"
timeout=$(( seconds == 0 ? 86400 : seconds + 120 ))
exec "$here/../Tests/TestBed/vm-run.sh" --timeout "$timeout" -- "$here/demo.sh" "$bin" "$seconds"
