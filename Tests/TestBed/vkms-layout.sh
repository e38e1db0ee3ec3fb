#!/usr/bin/env bash
# vkms-layout: builds a display layout on vkms (Linux 6.19+) from one line, inside the VM test
# bed's guest, and changes it afterwards: displays on cards, each lit at an exact custom mode,
# connectors plugged and unplugged, whole devices turned off and on. See usage() below.
#
# Each layout device NAME is a vkms configfs instance (/sys/kernel/config/vkms/NAME), a card of
# its own, with one plane, CRTC, encoder and connector per display, linked 1:1. `vkms` names the
# default device (card0, connector Virtual-1), which exists already. Each lit display is held by
# its own vkms-modeset process that owns the framebuffer and gives DRM master back after each
# step, so several holders share a card and none stands in the way of another's mode change.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: Tests/TestBed/vkms-layout.sh COMMAND [ARGS]      (as root, in the VM test bed's guest)

  up LAYOUT...        build and light the layout; LAYOUT is DEVICE=STEP[,STEP...] per device,
                      one STEP per display: HZ (e.g. 75 or 59.94: 1024x768 with the whole-kHz
                      pixel clock nearest), KHZkhz (that exact clock), off (created dark).
                      DEVICE `vkms` is the default card0 (one display); any other name is a new
                      vkms configfs device, enabled in the order given (so cards 1, 2, ...).
                        vkms-layout.sh up vkms=60 dock=75,143.99
  mode DISPLAY STEP   re-light one display (STEP as above, or `on`: the preferred mode); the
                      display's other holders and the card's other displays are not touched
  unplug DISPLAY      write the connector's status 2 (disconnected): a hotplug uevent
  plug DISPLAY        write status 1 (connected)
  disable DEVICE      write 0 to the device's `enabled` (its card goes), then end its holders
  enable DEVICE       write 1 (a new card node), and light its displays as they last were
  master DEVICE       a process takes DRM master of the card and holds it (a compositor's
                      stand-in: the fbdev client then leaves the card alone on hotplug)
  unmaster DEVICE     end that process
  show                one line per display: DISPLAY CARD CONNECTOR CRTC STEP
  down                end every holder and remove the configfs devices

DISPLAY is DEVICE.N, N counting from 1 in the order the layout gave (vkms.1 is Virtual-1).
Every command prints `vkms-layout: ...` lines saying what it did, and fails with one line
saying why. vkms-modeset comes from $VSYNC_TOOLS (or $VSYNC_BIN, or PATH).
EOF
}

state=/run/vkms-layout
cfg=/sys/kernel/config
say() { echo "vkms-layout: $*"; }
die() { echo "vkms-layout: $*" >&2; exit 1; }
modeset_bin() {
  local d
  for d in "${VSYNC_TOOLS:-}" "${VSYNC_BIN:-}"; do
    [ -n "$d" ] && [ -x "$d/vkms-modeset" ] && { echo "$d/vkms-modeset"; return; }
  done
  command -v vkms-modeset || die "no vkms-modeset: set VSYNC_TOOLS to the build directory holding it"
}

ensure_configfs() {
  mountpoint -q "$cfg" || mount -t configfs none "$cfg" || die "cannot mount configfs on $cfg (kernel without CONFIGFS_FS?)"
  [ -d "$cfg/vkms" ] || die "no $cfg/vkms: this kernel's vkms has no configfs (Linux 6.19+ needed)"
}

# The /dev/dri node of device NAME's card: its sysfs device is the faux device NAME.
card_of() {
  local d
  for d in /sys/class/drm/card[0-9]*; do
    [[ $(basename "$d") =~ ^card[0-9]+$ ]] || continue
    [ "$(basename "$(readlink -f "$d/device")")" = "$1" ] && { echo "/dev/dri/$(basename "$d")"; return 0; }
  done
  return 1
}

# The connector names of a card in object-id order (the order its displays were made). Writeback
# connectors (the default device has one) are hidden from ordinary clients: skipped.
connectors_of() {
  local card d
  card=$(basename "$1")
  for d in /sys/class/drm/"$card"-*; do
    [ -e "$d" ] || continue
    case "${d##*/"$card"-}" in Writeback-*) continue ;; esac
    echo "$(cat "$d/connector_id" 2>/dev/null || echo 0) ${d##*/"$card"-}"
  done | sort -n | awk '{print $2}'
}

# Waits (up to 10 s) for device NAME's card to appear and open.
wait_card() {
  local i card
  for i in $(seq 200); do
    if card=$(card_of "$1") && [ -c "$card" ] && { exec 7<>"$card"; } 2>/dev/null; then
      exec 7>&-
      echo "$card"; return 0
    fi
    sleep 0.05
  done
  die "device $1 has no usable card node after 10 s"
}

# hold DISPLAY STEP: a vkms-modeset holder for DISPLAY at STEP; ends the old one once the new
# one has set its step (so the CRTC passes from one framebuffer to the next, never dark).
hold() {
  local display=$1 step=$2 card conn old pid out i
  card=$(cat "$state/$display.card") conn=$(cat "$state/$display.conn")
  old=$(cat "$state/$display.pid" 2>/dev/null || true)
  out="$state/$display.out.$$.$RANDOM"
  setsid "$(modeset_bin)" --device "$card" --connector "$conn" --drop-master --hold 1000000 "$step" \
    >"$out" 2>&1 </dev/null &
  pid=$!
  for i in $(seq 600); do
    grep -q '^vkms-modeset: \(mode\|off\)' "$out" && break
    kill -0 "$pid" 2>/dev/null || die "$display: vkms-modeset $step failed: $(tail -n1 "$out")"
    sleep 0.05
  done
  grep -q '^vkms-modeset: \(mode\|off\)' "$out" || { kill "$pid" 2>/dev/null; die "$display: vkms-modeset $step did not answer in 30 s"; }
  echo "$pid" >"$state/$display.pid"
  echo "$step" >"$state/$display.step"
  [ -n "$old" ] && end_pid "$old"
  local line crtc
  line=$(grep -m1 '^vkms-modeset: \(mode\|off\)' "$out")
  crtc=$(sed -n 's/.* crtc \([0-9]*\).*/\1/p' <<<"$line")
  echo "$crtc" >"$state/$display.crtc"
  say "$display $card $conn crtc $crtc: ${line#vkms-modeset: }"
}

end_pid() {
  local i
  kill "$1" 2>/dev/null || return 0
  for i in $(seq 100); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.05; done
  kill -KILL "$1" 2>/dev/null || true
}

displays_of() { ls "$state" 2>/dev/null | sed -n "s/^\($1\.[0-9]*\)\.card$/\1/p" | sort -t. -k2n; }

up_device() {
  local name=$1 steps=$2 n i card conns
  IFS=, read -r -a list <<<"$steps"
  n=${#list[@]}
  if [ "$name" = vkms ]; then
    [ "$n" -eq 1 ] || die "the default device vkms has one display, got $n steps"
    card=$(card_of vkms) || die "no default vkms device (vkms.create_default_dev=0?)"
  else
    [[ $name =~ ^[A-Za-z0-9_-]+$ ]] || die "device name '$name': letters, digits, - and _ only"
    [ "$n" -ge 1 ] && [ "$n" -le 31 ] || die "device $name: 1 to 31 displays, got $n"
    ensure_configfs
    local d="$cfg/vkms/$name"
    [ -e "$d" ] && die "device $name exists already"
    mkdir "$d"
    for i in $(seq "$n"); do
      mkdir "$d/planes/plane$i" "$d/crtcs/crtc$i" "$d/encoders/encoder$i" "$d/connectors/connector$i"
      echo 1 >"$d/planes/plane$i/type"
      ln -s "$d/crtcs/crtc$i" "$d/planes/plane$i/possible_crtcs/"
      ln -s "$d/crtcs/crtc$i" "$d/encoders/encoder$i/possible_crtcs/"
      ln -s "$d/encoders/encoder$i" "$d/connectors/connector$i/possible_encoders/"
      echo 1 >"$d/connectors/connector$i/status"
    done
    echo 1 >"$d/enabled" || die "device $name: the kernel refused enabled=1 (see dmesg)"
    card=$(wait_card "$name")
  fi
  mapfile -t conns < <(connectors_of "$card")
  [ "${#conns[@]}" -eq "$n" ] || die "device $name: $card has ${#conns[@]} connectors, expected $n"
  for i in $(seq "$n"); do
    echo "$card" >"$state/$name.$i.card"
    echo "${conns[$((i - 1))]}" >"$state/$name.$i.conn"
    hold "$name.$i" "${list[$((i - 1))]}"
  done
}

display_arg() {
  [[ ${1:-} =~ ^[A-Za-z0-9_-]+\.[0-9]+$ ]] || die "'${1:-}' is not a DISPLAY (DEVICE.N, e.g. dock.2)"
  [ -f "$state/$1.card" ] || die "no display $1 in the layout (see: vkms-layout.sh show)"
}
device_dir() {
  [ "${1:-}" != vkms ] || die "the default device vkms is not in configfs: it cannot be turned off or unplugged"
  [ -d "$cfg/vkms/${1:-}" ] || die "no configfs device '${1:-}' (see: vkms-layout.sh show)"
  echo "$cfg/vkms/$1"
}

mkdir -p "$state"
cmd=${1:-}; shift || true
case "$cmd" in
  up)
    [ $# -gt 0 ] || die "up needs a layout, e.g. up vkms=60 dock=75,144"
    for entry in "$@"; do
      [[ $entry == *=* ]] || die "'$entry' is not DEVICE=STEP[,STEP...]"
      up_device "${entry%%=*}" "${entry#*=}"
    done ;;
  mode)
    display_arg "${1:-}"; [ -n "${2:-}" ] || die "mode needs a STEP (HZ, KHZkhz, off, on)"
    hold "$1" "$2" ;;
  unplug|plug)
    display_arg "${1:-}"
    dir=$(device_dir "${1%.*}")
    if [ "$cmd" = plug ]; then echo 1; else echo 2; fi >"$dir/connectors/connector${1##*.}/status"
    say "$1 $(cat "$state/$1.conn") ${cmd}ged" ;;
  disable)
    dir=$(device_dir "${1:-}")
    card=$(card_of "$1" || echo none)
    echo 0 >"$dir/enabled"
    for d in $(displays_of "$1"); do end_pid "$(cat "$state/$d.pid" 2>/dev/null || echo 0)"; rm -f "$state/$d.pid"; done
    say "$1 disabled ($card gone)" ;;
  enable)
    dir=$(device_dir "${1:-}")
    echo 1 >"$dir/enabled"
    card=$(wait_card "$1")
    mapfile -t conns < <(connectors_of "$card")
    for d in $(displays_of "$1"); do
      echo "$card" >"$state/$d.card"
      echo "${conns[$((${d##*.} - 1))]}" >"$state/$d.conn"
      hold "$d" "$(cat "$state/$d.step")"
    done
    say "$1 enabled as $card" ;;
  master)
    [ "${1:-}" = vkms ] && card=$(card_of vkms) || { device_dir "${1:-}" >/dev/null; card=$(card_of "$1"); }
    out="$state/$1.master.out"
    setsid "$(modeset_bin)" --device "$card" --hold 1000000 master >"$out" 2>&1 </dev/null &
    pid=$!
    for i in $(seq 600); do grep -q '^vkms-modeset: master' "$out" && break; kill -0 $pid 2>/dev/null || break; sleep 0.05; done
    grep -q '^vkms-modeset: master' "$out" || die "$1: could not take DRM master of $card: $(tail -n1 "$out")"
    echo "$pid" >"$state/$1.master"
    say "$1 master held on $card" ;;
  unmaster)
    [ -f "$state/${1:-}.master" ] || die "no master held for '${1:-}'"
    end_pid "$(cat "$state/$1.master")"; rm -f "$state/$1.master"
    say "$1 master released" ;;
  show)
    for f in "$state"/*.card; do
      [ -e "$f" ] || continue
      d=$(basename "$f" .card)
      echo "$d $(cat "$f") $(cat "$state/$d.conn") $(cat "$state/$d.crtc" 2>/dev/null || echo -) $(cat "$state/$d.step" 2>/dev/null || echo -)"
    done ;;
  down)
    for f in "$state"/*.pid "$state"/*.master; do [ -e "$f" ] && end_pid "$(cat "$f")"; done
    if [ -d "$cfg/vkms" ]; then
      for d in "$cfg"/vkms/*/; do
        [ -d "$d" ] || continue
        echo 0 >"$d/enabled" 2>/dev/null || true
        rm -f "$d"/planes/*/possible_crtcs/* "$d"/encoders/*/possible_crtcs/* "$d"/connectors/*/possible_encoders/*
        rmdir "$d"/planes/* "$d"/crtcs/* "$d"/encoders/* "$d"/connectors/* "$d" 2>/dev/null || true
      done
    fi
    rm -rf "$state"
    say "down" ;;
  -h|--help|help) usage ;;
  *) usage >&2; exit 64 ;;
esac
