#!/usr/bin/env bash
# Runs one command inside a small qemu guest that has a vkms DRM device (/dev/dri/card0), and
# exits with that command's status. The guest's root is the host's root (read-only over 9p,
# with a tmpfs overlay so writes work and vanish), so host-built binaries run as they are.
# See usage() below, or run with --help.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=Scripts/lib.sh
. "$here/../../Scripts/lib.sh"

usage() {
  cat <<'EOF'
usage: Tests/TestBed/vm-run.sh [options] -- COMMAND [ARGS...]

Boots a qemu (TCG) guest with vkms (/dev/dri/card0, connector Virtual-1, 1024x768@60 lit by
fbcon; more cards through configfs: Tests/TestBed/vkms-layout.sh), runs COMMAND as root in it and exits with COMMAND's exit status. COMMAND's stdout and
stderr stream live to this script's stdout and stderr; the kernel console goes to a log file.

In the guest: the host's root read-only with a tmpfs overlay (everything writable, nothing
reaches the host), fresh tmpfs /run, /dev/shm (/tmp shows the host's, writes stay in the guest); cwd = this cwd; HOME=/tmp; stdin is
/dev/null; no network. Environment: only HOME, PATH, LANG, TERM=dumb, variables named VSYNCD_*
or VSYNC_*, and those given with --env. When COMMAND exits the guest powers off, killing any
background processes it left.

options:
  --timeout SEC     give up SEC wall-clock seconds after qemu starts (boot + command;
                    default 300)
  --smp N           guest CPUs (default 2)
  --mem MB          guest memory (default 1024)
  --console FILE    write the kernel console log to FILE (default: a temp file, kept and
                    named on failure only)
  --env NAME=VALUE  set a variable in the guest (repeatable)
  --append ARGS     more kernel command line, e.g. vkms.create_default_dev=0 (no default
                    card0: only the cards Tests/TestBed/vkms-layout.sh makes)
  --systemd         boot systemd as PID 1 (on the same overlay) and run COMMAND as its unit
                    vm-run.service: for testing units under real systemd; udevd runs, and
                    logind and a getty on tty1 can be started (a login session on seat0)
  --host-tsc        give the guest the host's TSC rate (tsc_early_khz), so it has high-resolution
                    timers however busy the host is (else it calibrates, and on a busy host fails)
  --virtio-gpu      add qemu's virtio-gpu (a second real DRM driver: vblank from the kernel's
                    vblank timer, and an EDID from qemu); vkms registers first, so vkms's
                    default device stays card0 and virtio-gpu is card1
  -h, --help        show this text

environment: VSYNCD_VM_KERNEL=BZIMAGE boots that kernel instead of Tests/TestBed/build-kernel.sh's.

exit status: COMMAND's status; 125 if the guest did not come up, COMMAND did not finish in
time, or the guest died without reporting a status (the console log's tail is printed);
130/143 if interrupted.
EOF
}

timeout=300 smp=2 mem=1024 console="" envs=() extra_append="" devices=() host_tsc=0 systemd_packages=()
while [ $# -gt 0 ]; do
  case "$1" in
    --timeout) timeout=${2:?--timeout needs SEC}; shift 2 ;;
    --smp) smp=${2:?--smp needs N}; shift 2 ;;
    --mem) mem=${2:?--mem needs MB}; shift 2 ;;
    --console) console=${2:?--console needs FILE}; shift 2 ;;
    --env) envs+=("${2:?--env needs NAME=VALUE}"); shift 2 ;;
    --append) extra_append+=" ${2:?--append needs kernel arguments}"; shift 2 ;;
    --systemd) extra_append+=" vsyncd.guest=systemd systemd.unit=vm-run.service"
               # What a machine with systemd has for a login on its seat: udevd (the card's
               # group and uaccess tag), logind on the system bus, pam_systemd, setfacl/getfacl.
               systemd_packages=(systemd udev dbus libpam-systemd login acl); shift ;;
    --host-tsc) host_tsc=1; shift ;;
    --virtio-gpu) devices+=(-device "virtio-gpu-pci,edid=on,xres=1280,yres=800"); shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; break ;;
    *) echo "vm-run: unknown option '$1': the command goes after --; see --help" >&2; exit 125 ;;
  esac
done
fail() { echo "vm-run: $*" >&2; exit 125; }
[ $# -gt 0 ] || fail "no command given: put it after -- (see --help)"
[[ $timeout =~ ^[0-9]+$ && $timeout -gt 0 ]] || fail "--timeout must be a positive number of seconds, got '$timeout'"
[[ $smp =~ ^[0-9]+$ && $mem =~ ^[0-9]+$ && $mem -ge 256 ]] || fail "--smp takes a number, --mem a number of MB >= 256 (the guest hangs with less)"
for e in "${envs[@]+"${envs[@]}"}"; do
  [[ $e =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] || fail "--env wants NAME=VALUE, got '$e'"
done
# The guest mounts fresh tmpfs or pseudo file systems over these, so a cwd under them would
# not exist there.
case "$PWD/" in
  /run/*|/dev/*|/proc/*|/sys/*)
    fail "the current directory $PWD is hidden in the guest (tmpfs or pseudo-fs there): run from elsewhere" ;;
esac

# Packages (ensure_packages dies with the apt command to run when not root). In a subshell so
# that every failure of the test bed itself exits 125 with a "vm-run:" line.
( ensure_packages qemu-system-x86 busybox-static "${systemd_packages[@]+"${systemd_packages[@]}"}" >/dev/null ) \
  || fail "the test bed's packages are missing and could not be installed (see above)"
# VSYNCD_VM_KERNEL boots another bzImage (e.g. to compare kernels); else the test bed's own.
if [ -n "${VSYNCD_VM_KERNEL:-}" ]; then
  kernel=$VSYNCD_VM_KERNEL
else
  kernel=$("$here/build-kernel.sh") || fail "no kernel: Tests/TestBed/build-kernel.sh failed (see above)"
fi
[ -s "$kernel" ] || fail "Tests/TestBed/build-kernel.sh printed '$kernel', which is not a kernel image"

# Per-run files under /var/tmp, away from /tmp cleaners; each run has its own directory, so
# concurrent runs never share a file.
run=$(mktemp -d /var/tmp/vm-run.XXXXXX)
mkdir "$run/share"
temp_console=0
if [ -z "$console" ]; then
  console=$(mktemp /var/tmp/vm-run-console.XXXXXX.log)
  temp_console=1 # a temp log: deleted at exit unless a failure message names it
fi
: > "$console" || fail "cannot write the console log $console"
qemu_pid="" out_pid="" err_pid=""
# SIGTERM first (qemu exits cleanly), SIGKILL after 3 s: a caller may have left SIGTERM blocked
# in the mask we and qemu inherit (Swift's Foundation.Process does), and then only KILL works.
stop_qemu() {
  [ -n "$qemu_pid" ] || return 0
  kill "$qemu_pid" 2>/dev/null || true
  for _ in $(seq 30); do kill -0 "$qemu_pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$qemu_pid" 2>/dev/null || true
  wait "$qemu_pid" 2>/dev/null || true
  qemu_pid=""
}
# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
  stop_qemu
  [ -n "$out_pid" ] && finish_output
  rm -rf "$run"
  [ "$temp_console" -eq 1 ] && rm -f "$console"
  return 0
}
trap cleanup EXIT
# Ctrl-C: qemu ends on SIGTERM; the EXIT trap then removes the run directory.
trap 'trap - INT; echo "vm-run: interrupted" >&2; exit 130' INT
trap 'trap - TERM; exit 143' TERM
trap 'trap - HUP; exit 129' HUP

# The command, as a script the guest runs with `env -i bash` (printf %q quotes for bash).
{
  echo "export HOME=/tmp PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 TERM=dumb"
  while IFS= read -r name; do
    printf 'export %s=%q\n' "$name" "${!name}"
  done < <(compgen -e | grep -E '^(VSYNCD|VSYNC)_' || true)
  for e in "${envs[@]+"${envs[@]}"}"; do
    printf 'export %s=%q\n' "${e%%=*}" "${e#*=}"
  done
  printf 'cd %q || exit 125\n' "$PWD"
  printf 'exec'; printf ' %q' "$@"; printf '\n'
} > "$run/share/cmd.sh"

# The guest's stdout/stderr arrive on serial ports whose backends are FIFOs read by cat, so they
# reach our stdout/stderr live whatever those are (tty, pipe, file, socket).
mkfifo "$run/out" "$run/err"
cat "$run/out" &
out_pid=$!
cat "$run/err" >&2 &
err_pid=$!

# --host-tsc: the guest's TSC rate, so it never calibrates against the emulated PIT
# (host-tsc-khz.c says why: on a busy host that fails, and the guest then has no
# high-resolution timers). Not the default yet: the other VM tests keep the boot they were
# written on until each is checked with it.
tsc_arg=""
if [ "$host_tsc" = 1 ]; then
  if gcc -O2 -o "$run/host-tsc-khz" "$here/host-tsc-khz.c" 2>/dev/null && khz=$("$run/host-tsc-khz"); then
    tsc_arg=" tsc_early_khz=$khz"
  else
    fail "--host-tsc: could not measure the host's TSC rate (needs gcc and an x86 host)"
  fi
fi

start=$EPOCHREALTIME
# -accel tcg: KVM guests hang on these hosts. -nodefaults: no VGA/NIC/monitor, only our devices.
# tsc=reliable: the guest has no second clocksource (no HPET, no ACPI PM timer) to verify the TSC
# against, and Linux 7.x then never marks it fit for high-resolution timers: without it every
# timer in the guest fires on the 250 Hz tick (hres_active 0 in /proc/timer_list; 6.1 had 1).
# tsc_early_khz (--host-tsc): the rate it would otherwise calibrate, badly, on a busy host.
qemu-system-x86_64 \
  -accel tcg -smp "$smp" -m "$mem" -nodefaults -no-user-config -display none -no-reboot \
  -kernel "$kernel" \
  -append "console=ttyS0 root=root rootfstype=9p rootflags=trans=virtio,version=9p2000.L,msize=262144,cache=loose ro init=$here/guest-init.sh panic=-1 tsc=reliable$tsc_arg$extra_append" \
  -fsdev local,id=root,path=/,security_model=none,readonly=on,multidevs=remap \
  -device virtio-9p-pci,fsdev=root,mount_tag=root \
  -fsdev local,id=vmrun,path="$run/share",security_model=none \
  -device virtio-9p-pci,fsdev=vmrun,mount_tag=vmrun \
  "${devices[@]+"${devices[@]}"}" \
  -chardev file,id=con,path="$console",append=on -serial chardev:con \
  -chardev file,id=out,path="$run/out" -serial chardev:out \
  -chardev file,id=err,path="$run/err" -serial chardev:err \
  </dev/null >>"$console" 2>&1 &
qemu_pid=$!

# Whole seconds since qemu started ($EPOCHREALTIME's separator follows the locale).
elapsed() { echo $(( (${EPOCHREALTIME/[.,]/} - ${start/[.,]/}) / 1000000 )); }
timed_out=0
while kill -0 "$qemu_pid" 2>/dev/null; do
  if [ "$(elapsed)" -ge "$timeout" ]; then timed_out=1; break; fi
  sleep 0.1
done

# Waits for the cats to pass on the last output. If qemu died before opening the FIFOs, the cats
# still block in open(): a read-write open (which never blocks) lets them through to EOF.
finish_output() {
  : 1<>"$run/out"; : 1<>"$run/err"
  wait "$out_pid" "$err_pid" 2>/dev/null || true
  out_pid="" err_pid=""
}

# The last lines of the console say why a guest failed; print them with the one-line verdict.
guest_failed() {
  echo "----- last 30 lines of the guest console ($console) -----" >&2
  tail -n 30 "$console" >&2
  echo "-----" >&2
  echo "vm-run: $*" >&2
  temp_console=0 # keep it: the message names it
  exit 125
}
if [ $timed_out -eq 1 ]; then
  stop_qemu
  finish_output
  if [ -f "$run/share/up" ]; then
    guest_failed "command did not finish within $timeout s (guest up after $(cat "$run/share/up") s of guest uptime): see console log at $console"
  fi
  guest_failed "guest did not come up within $timeout s: see console log at $console"
fi
qemu_status=0; wait "$qemu_pid" || qemu_status=$?; qemu_pid=""
finish_output
if [ ! -f "$run/share/status" ]; then
  # qemu quits on SIGINT/SIGTERM by itself (e.g. a Ctrl-C that reached it but not us).
  if grep -q '^qemu-system-x86_64: terminating on signal' "$console"; then
    guest_failed "qemu was stopped by a signal before the command finished: see console log at $console"
  fi
  [ -f "$run/share/up" ] || guest_failed "guest did not come up (qemu exited with status $qemu_status after $(elapsed) s): see console log at $console"
  guest_failed "guest died before the command reported its status (qemu status $qemu_status): see console log at $console"
fi
status=$(cat "$run/share/status")
[[ $status =~ ^[0-9]+$ ]] || guest_failed "guest reported a malformed status '$status': see console log at $console"
[ -n "${VSYNCD_VM_VERBOSE:-}" ] && log "guest up after $(cat "$run/share/up") s uptime; run took $(elapsed) s wall; status $status"
exit "$status"
