# shellcheck shell=bash
# Sourced by guest-init.sh (PID 1) when vm-run.sh --systemd asked for systemd as PID 1.
#
# The command becomes a oneshot unit, vm-run.service, which the kernel command line names as
# the one unit to start (systemd.unit=vm-run.service): systemd brings up sysinit.target
# (journald, tmpfiles, the API file systems it finds already mounted), then runs the command
# with its output on ttyS1/ttyS2 as usual, writes its status to the per-run share and powers the
# guest off. Units that cannot work in the guest (gettys on its serial ports) are masked. udevd
# starts with sysinit.target as on any machine; the getty on tty1 and logind start only when the
# command starts them (a login session on seat0, VT 1).

# boot_systemd NEWROOT: moves PID 1 into NEWROOT (pivot_root) and execs systemd there.
boot_systemd() {
  local new=$1 units="$1/etc/systemd/system"
  mkdir -p "$units"
  cat > "$units/vm-run.service" <<'UNIT'
[Unit]
Description=The VM test bed's command (Tests/TestBed/vm-run.sh --systemd)
After=sysinit.target systemd-journald.service

[Service]
Type=oneshot
TimeoutStartSec=infinity
StandardInput=null
StandardOutput=null
ExecStart=/bin/bash /run/vm-run-unit.sh
UNIT
  # env -i: the command sees only what cmd.sh exports. The status goes back to the host as
  # without systemd; then an immediate power-off (qemu runs with -no-reboot, so it exits).
  cat > "$new/run/vm-run-unit.sh" <<'SCRIPT'
/usr/bin/env -i /bin/bash /run/vm-run/cmd.sh </dev/null >/dev/ttyS1 2>/dev/ttyS2
status=$?
echo "$status" > /run/vm-run/status.tmp && mv /run/vm-run/status.tmp /run/vm-run/status
for t in ttyS1 ttyS2; do timeout 5 stty -F /dev/$t raw 2>/dev/null; done
sync
busybox reboot -f
SCRIPT
  # Masked: gettys on the guest's serial ports (not getty@tty1: a command may log a user in on
  # the seat through it); and what costs seconds under TCG for nothing here, or would harm: systemd-tmpfiles --remove empties /tmp, where the host's checkout
  # (and the .debs under test) may be.
  for unit in serial-getty@ttyS0.service serial-getty@ttyS1.service serial-getty@ttyS2.service \
              console-getty.service systemd-firstboot.service \
              systemd-remount-fs.service systemd-tmpfiles-setup.service systemd-tmpfiles-clean.service \
              systemd-tmpfiles-clean.timer systemd-sysctl.service e2scrub_reap.service \
              systemd-update-utmp.service systemd-update-utmp-runlevel.service systemd-journal-flush.service \
              ldconfig.service systemd-hwdb-update.service systemd-machine-id-commit.service \
              systemd-binfmt.service proc-sys-fs-binfmt_misc.automount systemd-modules-load.service \
              kmod-static-nodes.service modprobe@.service systemd-random-seed.service \
              systemd-pstore.service apt-daily.timer apt-daily-upgrade.timer man-db.timer \
              dev-hugepages.mount sys-kernel-debug.mount sys-kernel-tracing.mount \
              sys-fs-fuse-connections.mount sys-kernel-config.mount; do
    ln -sf /dev/null "$units/$unit"
  done
  # Containers' policy-rc.d forbids starting services from maintainer scripts; this guest
  # is a machine, so deb-systemd-invoke must act as on one.
  rm -f "$new/usr/sbin/policy-rc.d"
  # The host may be a container: systemd would see its marker and act as a container's init
  # (ignoring the kernel command line, for one). The guest is a machine.
  rm -f "$new/.dockerenv" "$new/run/.containerenv"
  # systemd mounts these itself; pivot_root needs a private, not shared, old root.
  mount --make-rprivate / || fail "cannot make / private"
  mkdir -p "$new/.vm-oldroot"
  cd "$new" || fail "cannot enter the overlay"
  pivot_root . .vm-oldroot || fail "pivot_root into the overlay failed"
  say "systemd as PID 1 after $(cut -d' ' -f1 /proc/uptime) s"
  exec /lib/systemd/systemd --unit=vm-run.service --log-target=console --show-status=false
}
