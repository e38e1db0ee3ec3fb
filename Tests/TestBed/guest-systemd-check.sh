#!/bin/bash
# The vsyncd Debian package under real systemd, inside the VM test bed (run by
# Tests/VMTests/SystemdVMTests.swift through `Tests/TestBed/vm-run.sh --systemd`; PID 1 is systemd).
#
# With the Swift toolchain hidden, it installs the packages with dpkg (their maintainer scripts
# enable and start vsyncd.socket), connects two clients as an unprivileged member of group
# video, changes the mode in the middle of a run of VSYNC_SECONDS, logs a user with no group in
# on seat0 (autologin getty on tty1, logind, udevd) and follows ticks from its session, stops
# the daemon, then denies it the device. Each check prints one line, `@@check NAME ok|FAIL DETAIL`; figures
# print `@@figure NAME VALUE`; the test asserts on every line it expects.
#
# Environment: VSYNC_DEB_DIR (the .debs), VSYNC_HIDE (the toolchain's root, covered by a tmpfs),
# VSYNC_BIN (the debug products, for vkms-modeset), VSYNC_SECONDS (default 30).
set -u
deb=${VSYNC_DEB_DIR:?} hide=${VSYNC_HIDE:?} bin=${VSYNC_BIN:?} seconds=${VSYNC_SECONDS:-30}

check() { # NAME STATUS DETAIL...
  local name=$1 status=$2; shift 2
  if [ "$status" -eq 0 ]; then echo "@@check $name ok $*"; else echo "@@check $name FAIL $*"; fi
}
uptime_s() { cut -d' ' -f1 /proc/uptime; }
# wait_until SECONDS COMMAND...: polls COMMAND until it succeeds, for SECONDS of guest time at
# most (a count of sleeps would stretch with every fork on a loaded TCG host).
wait_until() {
  local end=$(($(cut -d. -f1 /proc/uptime) + $1)); shift
  until "$@"; do [ "$(cut -d. -f1 /proc/uptime)" -lt "$end" ] || return 1; sleep 0.2; done
}
show() { systemctl show vsyncd.service -p "$1" --value; }
# A tool from the debug build: it needs the toolchain, so it runs where the tmpfs is gone.
with_toolchain() { unshare -m sh -c "umount '$hide' && exec \"\$@\"" sh "$@"; }

echo "@@figure systemd_up_s $(uptime_s)"
# The kernel names a process its RT watchdog (LimitRTTIME) kills only with this on.
sysctl -q kernel.print-fatal-signals=1
[ "$(cat /proc/1/comm)" = systemd ]; check pid1-is-systemd $? "PID 1 is $(cat /proc/1/comm)"
systemctl is-active --quiet systemd-journald.service; check journald $? "journald $(systemctl is-active systemd-journald.service)"

# A machine without Swift, from here on.
mount -t tmpfs -o ro,mode=0755 none "$hide" && [ ! -e "$hide/usr/bin" ]; check toolchain-hidden $? "$hide covered"
# udevd (started with sysinit.target) gives DRM nodes group video, mode 0660, and the uaccess
# tag logind's seat ACLs follow, once it has handled the boot's events.
udevadm settle --timeout 60
node="$(stat -c %a:%U:%G /dev/dri/card0) tags $(udevadm info -q property -p /sys/class/drm/card0 | sed -n 's/^TAGS=//p')"
case "$node" in "660:root:video tags "*:uaccess:*) true ;; *) false ;; esac; check udev-card0 $? "/dev/dri/card0 $node"

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
# CPUSchedulingPolicy=rr, CPUSchedulingPriority=1 and LimitRTTIME=2s, applied with
# RestrictRealtime=yes in force (field 41 of stat is the policy, 2 = SCHED_RR; 40 the priority).
sched=$(awk '{print $41 ":" $40}' /proc/"$pid"/stat)
rttime=$(awk '/^Max realtime timeout/ {print $4 ":" $5}' /proc/"$pid"/limits)
ready=$(journalctl -u vsyncd.service -o cat --no-pager | grep -m 1 -o "vsyncd ready .*")
[ "$sched" = 2:1 ] && [ "$rttime" = 2000000:2000000 ] && echo "$ready" | grep -q "scheduled SCHED_RR 1$"
check realtime-rr-1 $? "policy:rt_priority $sched, RLIMIT_RTTIME soft:hard $rttime us; $ready"
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

# Who may connect, while the daemon still runs, with a real login on the seat: logind and an
# autologin getty on tty1 (VT 1, the foreground one), whose PAM session (pam_systemd) makes
# vsync-seat (no group, not in video) the active session's user on seat0; logind then gives it
# an ACL entry on the card (udev's uaccess tag) and takes it away when the session ends. A
# second user with no session is refused with the daemon's line throughout (the socket is 0666).
seat=vsync-seat io=/run/vsync-seat
refusal() { echo "uid $1 may not use the display: it has no read-write access to /dev/dri/card0"; }
acl_of() { getfacl -cp /dev/dri/card0 2>/dev/null | grep "^user:$1:"; }
groupadd -K GID_MAX=65000 --gid 61002 "$seat"
useradd -K UID_MAX=65000 --uid 61002 --gid 61002 --create-home --shell /bin/bash "$seat"
mkdir -m 0700 "$io" && chown "$seat:" "$io"
# The session's login shell: it says which session it is in, waits for the word to go, follows
# three ticks from inside the session, then stays logged in until the session is terminated.
cat > "/home/$seat/.bash_profile" <<PROFILE
echo "\$XDG_SESSION_ID \$(cut -d: -f3 /proc/self/cgroup) groups \$(id -G)" > $io/session.tmp && mv $io/session.tmp $io/session
end=\$((\$(cut -d. -f1 /proc/uptime) + 120))
until [ -e $io/go ] || [ "\$(cut -d. -f1 /proc/uptime)" -ge "\$end" ]; do sleep 0.2; done
/usr/bin/vsync-probe follow --frames 3 --timeout 30 > $io/ticks.out 2>&1
echo \$? > $io/ticks.tmp && mv $io/ticks.tmp $io/ticks.status
exec sleep infinity
PROFILE
# Only the one getty, logged in once: logind spawns none of its own (autovt), and this one
# neither waits for an idle job queue (vm-run.service is a job until the end) nor restarts.
# No per-user systemd: logind would hold the login until it is up, minutes under TCG, for
# nothing the seat's ACL needs.
systemctl mask --runtime --quiet user@.service
mkdir -p /run/systemd/logind.conf.d /run/systemd/system/getty@tty1.service.d
printf '[Login]\nNAutoVTs=0\nReserveVT=0\n' > /run/systemd/logind.conf.d/vm-run.conf
printf '[Service]\nType=simple\nRestart=no\nExecStart=\nExecStart=-/sbin/agetty --autologin %s --noclear %%I linux\n' "$seat" \
  > /run/systemd/system/getty@tty1.service.d/autologin.conf
systemctl daemon-reload
acl_before=$(acl_of "$seat")
systemctl start systemd-logind.service
check logind $? "systemd-logind $(systemctl is-active systemd-logind.service), dbus $(systemctl is-active dbus.service)"
systemctl start getty@tty1.service
wait_until 120 test -e $io/session
read -r sid session_cgroup _ session_groups < <(cat $io/session 2>/dev/null)
sess() { loginctl show-session "${sid:-none}" -p "$1" --value 2>&1; }
active() { [ "$(sess State)" = active ]; }
wait_until 30 active
props="Name=$(sess Name) Seat=$(sess Seat) VTNr=$(sess VTNr) Type=$(sess Type) Active=$(sess Active) State=$(sess State)"
[ "$props" = "Name=$seat Seat=seat0 VTNr=1 Type=tty Active=yes State=active" ] \
  && [ "$session_cgroup" = "/user.slice/user-61002.slice/session-$sid.scope" ] && [ "$session_groups" = 61002 ]
check seat-session-active $? "session ${sid:-none}: $props, shell in $session_cgroup, groups $session_groups; $(loginctl list-sessions --no-legend | tr -s ' ' | tr '\n' ';')"
acl=$(acl_of "$seat")
[ -z "$acl_before" ] && [ "$acl" = "user:$seat:rw-" ]; check seat-acl-by-logind $? "before the session: ${acl_before:-no entry}; in it: ${acl:-no entry}"
as_other=(setpriv --reuid 61003 --regid 61003 --clear-groups --)
out=$("${as_other[@]}" /usr/bin/vsync-probe follow --frames 1 --timeout 30 2>&1)
echo "$out" | grep -q "$(refusal 61003)"; check no-session-refused $? "uid 61003: $(echo "$out" | tail -n 1)"
touch $io/go
wait_until 60 test -e $io/ticks.status
ticks=$(grep -c '^seq ' $io/ticks.out 2>/dev/null)
[ "$(cat $io/ticks.status 2>/dev/null)" = 0 ] && [ "$ticks" = 3 ]
check seat-acl-ticks $? "$seat in session $sid: $ticks tick(s), last: $(grep '^seq ' $io/ticks.out 2>/dev/null | tail -n 1)"
loginctl terminate-session "${sid:-none}"
ended() { ! loginctl show-session "$sid" >/dev/null 2>&1; }
wait_until 30 ended
gone=$(loginctl show-session "$sid" -p State --value 2>&1)
acl=$(acl_of "$seat")
out=$(setpriv --reuid 61002 --regid 61002 --clear-groups -- /usr/bin/vsync-probe follow --frames 1 --timeout 30 2>&1)
echo "$out" | grep -q "$(refusal 61002)" && [ -z "$acl" ]
check session-ended-refused $? "session $sid: ${gone}; ACL: ${acl:-no entry}; $(echo "$out" | tail -n 1)"
line=$(journalctl -u vsyncd.service -o cat --no-pager | grep -m 1 "uid 61003 refused: vsyncd: $(refusal 61003)")
[ -n "$line" ]; check refusal-logged $? "$line"

# WatchdogSec=10s: alive through the whole run means WATCHDOG=1 kept coming.
# A restart says why: the daemon's own line, systemd's about the unit, or the kernel's RT watchdog.
exits=$(journalctl -o short-monotonic --no-pager | grep -E "vsyncd.service: (Main process exited|Watchdog|Failed with)|RT Watchdog Timeout|vsyncd\[[0-9]+\]: vsyncd: " | head -n 6 | tr '\n' ' ')
[ "$(show MainPID)" = "$pid" ] && [ "$(show NRestarts)" = 0 ]; check watchdog-kept-alive $? "MainPID $(show MainPID) (was $pid), NRestarts $(show NRestarts), WatchdogUSec $(show WatchdogUSec)${exits:+; $exits}"
journalctl -u vsyncd.service -o cat --no-pager >/tmp/journal.txt 2>&1
grep -q "display 1 added" /tmp/journal.txt; check journal-has-the-daemon $? "$(head -n 1 /tmp/journal.txt)"
killed=$(journalctl -o cat --no-pager 2>&1 | grep -E "SIGSYS|status=31/SYS|code=killed|code=dumped|RT Watchdog" | head -n 3 | tr '\n' ' ')
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
