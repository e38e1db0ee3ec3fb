#!/bin/bash
# The vsyncd Debian package under real systemd, inside the VM test bed (run by
# Tests/VMTests/SystemdVMTests.swift through `Tests/TestBed/vm-run.sh --systemd`; PID 1 is systemd).
#
# With the Swift toolchain hidden, it installs the packages with dpkg (their maintainer scripts
# enable and start vsyncd.socket), connects two clients as an unprivileged member of group
# video, changes the mode in the middle of a run of VSYNC_SECONDS, stops the daemon, then
# denies it the device. Each check prints one line, `@@check NAME ok|FAIL DETAIL`; figures
# print `@@figure NAME VALUE`; the test asserts on every line it expects.
#
# Environment: VSYNC_DEB_DIR (the .debs), VSYNC_HIDE (the toolchain's root, covered by a tmpfs),
# VSYNC_BIN (the debug products, for vkms-modeset), VSYNC_SECONDS (default 60).
set -u
deb=${VSYNC_DEB_DIR:?} hide=${VSYNC_HIDE:?} bin=${VSYNC_BIN:?} seconds=${VSYNC_SECONDS:-60}

check() { # NAME STATUS DETAIL...
  local name=$1 status=$2; shift 2
  if [ "$status" -eq 0 ]; then echo "@@check $name ok $*"; else echo "@@check $name FAIL $*"; fi
}
uptime_s() { cut -d' ' -f1 /proc/uptime; }
show() { systemctl show vsyncd.service -p "$1" --value; }
# A tool from the debug build: it needs the toolchain, so it runs where the tmpfs is gone.
with_toolchain() { unshare -m sh -c "umount '$hide' && exec \"\$@\"" sh "$@"; }

echo "@@figure systemd_up_s $(uptime_s)"
[ "$(cat /proc/1/comm)" = systemd ]; check pid1-is-systemd $? "PID 1 is $(cat /proc/1/comm)"
systemctl is-active --quiet systemd-journald.service; check journald $? "journald $(systemctl is-active systemd-journald.service)"

# A machine without Swift, from here on.
mount -t tmpfs -o ro,mode=0755 none "$hide" && [ ! -e "$hide/usr/bin" ]; check toolchain-hidden $? "$hide covered"
# What Debian's udev rules do: DRM nodes belong to group video, mode 0660 (no udevd here).
chgrp video /dev/dri/card0 && chmod 0660 /dev/dri/card0

# man-db's trigger would re-index every manual page over 9p under TCG: minutes, for nothing here.
rm -f /var/lib/man-db/auto-update
out=$(dpkg -i "$deb"/vsyncd_*_amd64.deb "$deb"/libvsync1_*_amd64.deb 2>&1)
check dpkg-install $? "$(echo "$out" | tail -n 2 | tr '\n' ' ')"
systemctl is-enabled --quiet vsyncd.socket; check socket-enabled $? "vsyncd.socket $(systemctl is-enabled vsyncd.socket 2>&1)"
systemctl is-active --quiet vsyncd.socket; check socket-listening $? "vsyncd.socket $(systemctl is-active vsyncd.socket)"
mode=$(stat -c %a:%G /run/vsyncd/vsyncd.sock 2>&1)
[ "$mode" = 666:root ]; check socket-mode $? "$mode"
state=$(show ActiveState)
[ "$state" = inactive ]; check no-daemon-before-a-client $? "vsyncd.service $state"

# Two clients as a plain member of group video: the packaged vsync-probe, at 60 and 30 fps.
video=$(getent group video | cut -d: -f3)
as_user=(setpriv --reuid 61001 --regid 61001 --groups "$video" --)
started=$(uptime_s)
# Started directly (not through a function), so $! is the probe itself and gets the SIGINT.
"${as_user[@]}" /usr/bin/vsync-probe follow --fps 60 --json >/tmp/full.out 2>/tmp/full.err & full=$!
for _ in $(seq 200); do [ "$(show SubState)" = running ] && break; sleep 0.1; done
echo "@@figure activation_s $(echo "$(uptime_s) - $started" | bc)"
state="$(show ActiveState)/$(show SubState)"
[ "$state" = active/running ]; check socket-activation $? "first client started vsyncd.service: $state"
"${as_user[@]}" /usr/bin/vsync-probe follow --fps 30 --json >/tmp/half.out 2>/tmp/half.err & half=$!
pid=$(show MainPID)
# Type=notify: active means READY=1 arrived; STATUS= is the daemon's own line, which says 2
# clients once the second has connected (a process starting under TCG: waited for, 30 s at most).
for _ in $(seq 300); do
  status_text=$(show StatusText)
  echo "$status_text" | grep -q "display(s) (1 on), 2 client(s)" && break
  sleep 0.1
done
echo "$status_text" | grep -q "display(s) (1 on), 2 client(s)"; check ready-and-status $? "StatusText=$status_text"
uid=$(awk '/^Uid:/ {print $2}' /proc/"$pid"/status)
[ "$uid" -ge 61184 ] && [ "$uid" -le 65519 ]; check dynamic-user $? "uid $uid ($(show User))"
groups=" $(awk '/^Groups:/ {$1=""; print}' /proc/"$pid"/status) "
case "$groups" in *" $video "*) true ;; *) false ;; esac; check group-video $? "groups:$groups"
# CPUSchedulingPolicy=rr, CPUSchedulingPriority=1 and LimitRTTIME=500ms, applied with
# RestrictRealtime=yes in force (field 41 of stat is the policy, 2 = SCHED_RR; 40 the priority).
sched=$(awk '{print $41 ":" $40}' /proc/"$pid"/stat)
rttime=$(awk '/^Max realtime timeout/ {print $4 ":" $5}' /proc/"$pid"/limits)
[ "$sched" = 2:1 ] && [ "$rttime" = 500000:500000 ]; check realtime-rr-1 $? "policy:rt_priority $sched, RLIMIT_RTTIME soft:hard $rttime us"
fds=$(find /proc/"$pid"/fd -lname /dev/dri/card0 2>/dev/null | wc -l)
[ "$fds" -ge 1 ]; check device-open $? "/dev/dri/card0 open $fds time(s)"

# Half way, a mode change to 50 Hz (vkms-modeset sets it and holds it 5 s; it stays after).
sleep $((seconds / 2 - 2))
with_toolchain "$bin/vkms-modeset" --hold 5 50 >/tmp/modeset.out 2>&1
check mode-change $? "$(tr '\n' ' ' </tmp/modeset.out)"
sleep $((seconds - seconds / 2 - 5))
kill -INT $full $half; wait $full $half
echo "@@figure run_s $(echo "$(uptime_s) - $started" | bc)"
for c in full half; do
  sed "s/^/@@$c /" /tmp/$c.out
  sed "s/^/@@$c.err /" /tmp/$c.err
done

# A Flatpak app as the packaged unit sees it: a process in the systemd scope `flatpak run` asks
# for, named after its app id, whose root the dynamic user may not enter. The log names the app.
systemd-run --quiet --scope --unit="app-flatpak-org.example.Sandboxed-$$.scope" -- \
  "${as_user[@]}" /usr/bin/vsync-probe follow --frames 3 --timeout 30 >/tmp/scoped.out 2>&1
status=$?
line=$(journalctl -u vsyncd.service -o cat --no-pager | grep -m 1 "client connected: .* app org.example.Sandboxed ")
[ "$status" -eq 0 ] && [ -n "$line" ]; check flatpak-scope-app-id $? "${line:-exit $status, no line names the app: $(tail -n 1 /tmp/scoped.out)}"

# Who may connect, while the daemon still runs. card0 is root:video 0660 with no ACL: a user in
# no group, with no session, is refused with the daemon's line (the socket itself is 0666). The
# ACL entry logind's uaccess gives the active seat's user lets it in; taking the entry away, as
# the session's end does, refuses it.
as_seat=(setpriv --reuid 61002 --regid 61002 --clear-groups --)
refusal="uid 61002 may not use the display: it has no read-write access to /dev/dri/card0"
out=$("${as_seat[@]}" /usr/bin/vsync-probe follow --frames 1 --timeout 30 2>&1)
echo "$out" | grep -q "$refusal"; check no-session-refused $? "$(echo "$out" | tail -n 1)"
setfacl -m u:61002:rw /dev/dri/card0
out=$("${as_seat[@]}" /usr/bin/vsync-probe follow --frames 3 --timeout 30 2>&1)
check seat-acl-ticks $? "$(echo "$out" | tail -n 1)"
setfacl -x u:61002 /dev/dri/card0
out=$("${as_seat[@]}" /usr/bin/vsync-probe follow --frames 1 --timeout 30 2>&1)
echo "$out" | grep -q "$refusal"; check session-ended-refused $? "$(echo "$out" | tail -n 1)"
line=$(journalctl -u vsyncd.service -o cat --no-pager | grep -m 1 "uid 61002 refused: vsyncd: $refusal")
[ -n "$line" ]; check refusal-logged $? "$line"

# WatchdogSec=10s: alive through the whole run means WATCHDOG=1 kept coming.
[ "$(show MainPID)" = "$pid" ] && [ "$(show NRestarts)" = 0 ]; check watchdog-kept-alive $? "MainPID $(show MainPID) (was $pid), NRestarts $(show NRestarts), WatchdogUSec $(show WatchdogUSec)"
journalctl -u vsyncd.service -o cat --no-pager >/tmp/journal.txt 2>&1
grep -q "display 1 added" /tmp/journal.txt; check journal-has-the-daemon $? "$(head -n 1 /tmp/journal.txt)"
killed=$(journalctl -o cat --no-pager 2>&1 | grep -E "SIGSYS|status=31/SYS|code=killed" | head -n 3 | tr '\n' ' ')
[ -z "$killed" ]; check no-sigsys $? "${killed:-nothing killed}"

systemctl stop vsyncd.service
result="$(show Result) $(show ExecMainCode)/$(show ExecMainStatus)"
[ "$result" = "success 1/0" ]; check clean-stop $? "Result ExecMainCode/Status: $result"

# Denied the device, the unit fails with the daemon's one line in the journal.
mkdir -p /run/systemd/system/vsyncd.service.d
printf '[Service]\nDeviceAllow=\n' >/run/systemd/system/vsyncd.service.d/deny.conf
systemctl daemon-reload
since=$(date +%s)
systemctl start vsyncd.service 2>/dev/null
# Its line reaches the journal when the daemon has run (30 s at most).
for _ in $(seq 300); do
  line=$(journalctl -u vsyncd.service --since "@$since" -o cat --no-pager | grep "^vsyncd: " | head -n 1)
  [ -n "$line" ] && break
  sleep 0.1
done
echo "$line" | grep -q "permission denied on /dev/dri/card0"; check denied-device-one-line $? "$line"
# Restart=on-failure retries it (auto-restart) until the start limit fails it for good.
state="$(show ActiveState)/$(show SubState)"
restarts=$(show NRestarts)
case "$state" in failed/*) true ;; activating/*) [ "$restarts" -ge 1 ] ;; *) false ;; esac
check denied-device-not-active $? "vsyncd.service $state after $restarts restart(s)"
systemctl stop vsyncd.service
rm -r /run/systemd/system/vsyncd.service.d && systemctl daemon-reload

# 0.8 since AF_NETLINK was allowed for DRM hotplug uevents (0.7 without it).
score=$(systemd-analyze security --offline=true /lib/systemd/system/vsyncd.service 2>&1 | sed -n 's/.*Overall exposure level for vsyncd.service: \([0-9.]*\).*/\1/p')
[ -n "$score" ] && [ "$(echo "$score <= 0.8" | bc)" = 1 ]; check security-exposure $? "systemd-analyze security: ${score:-unreadable}"
echo "@@done"
