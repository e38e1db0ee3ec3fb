#!/bin/bash
# PID 1 of the VM test bed's guest (started by Tests/TestBed/vm-run.sh through the kernel's init=).
#
# The guest's root is the host's root, shared read-only over virtio-9p, so every host tool and
# every host-built Swift binary runs as it is. This script:
#   1. stacks an overlay over that root with a tmpfs on top, so programs can write anywhere
#      (writes stay in guest memory; the host is never touched), then gives the usual fresh
#      /proc, /sys, /dev, /dev/pts, /dev/shm, /run (/tmp is the overlay's, writable);
#   2. mounts the per-run writable share (tag "vmrun") at /run/vm-run: the host wrote the command
#      there as cmd.sh; the command's exit status goes back there;
#   3. runs the command with stdout on ttyS1 and stderr on ttyS2 (raw, so bytes pass unchanged
#      and live to the host's stdout/stderr), while the kernel console stays on ttyS0;
#   4. powers off with `reboot -f` (qemu runs with -no-reboot, so it exits).
# With vm-run.sh --systemd, step 3 is systemd's instead: see guest-systemd.sh.
# If anything here fails, PID 1 exits, the kernel panics, and panic=-1 ends qemu at once:
# vm-run.sh then reports that no status came back instead of waiting for its timeout.
set -u
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

say() { echo "guest-init: $*" >/dev/console 2>/dev/null || echo "guest-init: $*" >&2; }
fail() { say "$*"; exit 1; }
# busybox-static's reboot calls reboot(2) directly; Debian's /sbin/reboot wants systemd.
poweroff_now() { sync; busybox reboot -f; sleep 5; exit 1; }

mountpoint -q /proc || mount -t proc proc /proc || fail "cannot mount /proc"
mountpoint -q /dev || mount -t devtmpfs devtmpfs /dev || fail "cannot mount /dev"
say "booted in $(cut -d' ' -f1 /proc/uptime) s"

# Scratch space for the overlay's upper layer and the new root's mount point.
mount -t tmpfs -o mode=0755 tmpfs /run || fail "cannot mount tmpfs on /run"
mkdir -p /run/ovl/upper /run/ovl/work /run/ovl/root
mount -t overlay overlay -o lowerdir=/,upperdir=/run/ovl/upper,workdir=/run/ovl/work /run/ovl/root \
  || fail "cannot mount overlay over the 9p root"
new=/run/ovl/root
mount -t proc proc "$new/proc" || fail "cannot mount proc"
mount -t sysfs sysfs "$new/sys" || fail "cannot mount sysfs"
# vkms builds extra cards through configfs (Tests/TestBed/vkms-layout.sh); a kernel without it skips this.
[ -d "$new/sys/kernel/config" ] && mount -t configfs configfs "$new/sys/kernel/config" 2>/dev/null
mount -t devtmpfs devtmpfs "$new/dev" || fail "cannot mount devtmpfs"
mkdir -p "$new/dev/pts" "$new/dev/shm"
mount -t devpts -o newinstance,ptmxmode=0666 devpts "$new/dev/pts" 2>/dev/null || true
mount -t tmpfs -o mode=1777 tmpfs "$new/dev/shm"
# What udev would add: bash's process substitution and many tools need /dev/fd and friends.
ln -sf /proc/self/fd "$new/dev/fd"
ln -sf /proc/self/fd/0 "$new/dev/stdin"
ln -sf /proc/self/fd/1 "$new/dev/stdout"
ln -sf /proc/self/fd/2 "$new/dev/stderr"
# /tmp stays the overlay's view of the host's /tmp (writes land in guest memory), so a checkout
# under /tmp, as CI may make, is visible in the guest. A fresh /run like a real boot.
mount -t tmpfs -o mode=0755 tmpfs "$new/run" || fail "cannot mount tmpfs on /run"
mkdir -p "$new/run/vm-run" "$new/run/lock"
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,cache=none vmrun "$new/run/vm-run" \
  || fail "cannot mount the per-run share (tag vmrun)"
[ -f "$new/run/vm-run/cmd.sh" ] || fail "no cmd.sh in the per-run share"

for t in ttyS1 ttyS2; do
  stty -F "$new/dev/$t" 115200 raw -echo -onlcr || fail "cannot set $t raw"
done

# Tell the host the guest is up (vm-run.sh words its timeout error after this).
cut -d' ' -f1 /proc/uptime > "$new/run/vm-run/up"

# vm-run.sh --systemd: systemd becomes PID 1 on the overlay and runs the command as a unit.
if grep -qw 'vsyncd.guest=systemd' /proc/cmdline; then
  # shellcheck source=Tests/TestBed/guest-systemd.sh
  . "$(dirname "$0")/guest-systemd.sh"
  boot_systemd "$new"   # does not return
fi
say "running command"
# env -i: the command sees only what cmd.sh exports, not the kernel's environment for PID 1.
chroot "$new" /usr/bin/env -i /bin/bash /run/vm-run/cmd.sh \
  </dev/null >"$new/dev/ttyS1" 2>"$new/dev/ttyS2"
status=$?
# Written to a temp name then renamed, so the host never reads half a number.
echo "$status" > "$new/run/vm-run/status.tmp" && mv "$new/run/vm-run/status.tmp" "$new/run/vm-run/status"
say "command exited with status $status after $(cut -d' ' -f1 /proc/uptime) s uptime"
# Let the serial ports drain before power-off: stty applies settings with TCSADRAIN, which
# waits until the port has sent everything (a background child may still hold the port open,
# so the last close alone is no guarantee).
for t in ttyS1 ttyS2; do timeout 5 stty -F "$new/dev/$t" raw 2>/dev/null; done
poweroff_now
