# shellcheck shell=sh
# Shell functions for running vsyncd and its clients inside the VM test bed (Tests/TestBed/vm-run.sh),
# sourced by the scripts the VM tests build (Tests/VMTests/Vsyncd*.swift, Fault*.swift):
#
#   Tests/TestBed/vm-run.sh --env VSYNC_BIN=$PWD/.build/debug -- sh -c '. Tests/TestBed/guest-vsyncd-lib.sh
#     vsyncd_start; follow full --fps 0; follow half --fps 30; sleep 3
#     stop full; stop half; vsyncd_stop; dump'
#
# Everything the tests read is printed as tagged lines, "@@TAG rest": @@mark NAME NS (guest
# CLOCK_MONOTONIC), @@modeset NS LINE, and by dump: @@NAME LINE for each client's stdout,
# @@NAME.err for its stderr, @@vsyncd.log for the daemon's log.
# Client NAMEs must be shell identifiers (they name variables holding the pids).

: "${VSYNC_BIN:?set VSYNC_BIN to the build directory holding vsyncd and vsync-probe}"
# vkms-modeset, a test helper: in the debug build, also when VSYNC_BIN is the release build.
: "${VSYNC_TOOLS:=$VSYNC_BIN}"
VSYNCD_SOCK=/tmp/vsyncd.sock
VSYNCD_LOG=/tmp/vsyncd.log
GUEST_CLIENT="$(pwd)/Tests/TestBed/guest-vsyncd-client.py"
: >"$VSYNCD_LOG"

# CLOCK_MONOTONIC in ns, the clock of every timestamp in vsyncd's protocol: /proc/timer_list's
# "now at" line is read from it; /proc/uptime (boot time, same origin, 10 ms) if that is missing.
mono_ns() {
  awk '/^now at/ { print $3; found = 1; exit } END { if (!found) exit 1 }' /proc/timer_list 2>/dev/null \
    || awk '{ printf "%d\n", $1 * 1e9 }' /proc/uptime
}

mark() { echo "@@mark $1 $(mono_ns)"; }

# vsyncd_start [ARGS...]: starts vsyncd on $VSYNCD_SOCK and returns once it logged "ready"
# (marked as vsyncd-ready).
# shellcheck disable=SC2120 # the tests' guest scripts pass it vsyncd's options
vsyncd_start() {
  before=$(grep -c 'vsyncd ready' "$VSYNCD_LOG")
  "$VSYNC_BIN/vsyncd" --socket "$VSYNCD_SOCK" --log-level info "$@" 2>>"$VSYNCD_LOG" &
  VSYNCD=$!
  i=0
  while [ "$(grep -c 'vsyncd ready' "$VSYNCD_LOG")" -le "$before" ]; do
    i=$((i + 1))
    if [ $i -gt 800 ] || ! kill -0 $VSYNCD 2>/dev/null; then echo "@@error vsyncd did not become ready"; return 1; fi
    sleep 0.025
  done
  mark vsyncd-ready
}

# vsyncd_restart_timed: starts vsyncd again and prints @@listening NS, the time its socket first
# accepted a connection, and @@serving NS, when it answered a handshake (a poller started
# beforehand sees both; the "ready" log line reaches us late in a TCG guest).
vsyncd_restart_timed() {
  python3 "$GUEST_CLIENT" "$VSYNCD_SOCK" --wait-listen >/tmp/listen.out 2>&1 &
  poller=$!
  i=0
  while ! grep -q polling /tmp/listen.out; do
    i=$((i + 1)); [ $i -gt 600 ] && { echo "@@error listen poller did not start"; return 1; }
    sleep 0.02
  done
  mark launch
  # shellcheck disable=SC2119 # no options here: the defaults
  vsyncd_start
  wait "$poller"
  sed -n 's/.*"\(listening\|serving\)", "recvNs": \([0-9]*\).*/@@\1 \2/p' /tmp/listen.out
}

# vsyncd_stop: SIGTERM, and the exit status as @@vsyncd.status.
vsyncd_stop() {
  kill -TERM "$VSYNCD" 2>/dev/null
  wait "$VSYNCD"
  echo "@@vsyncd.status $?"
}

# follow NAME ARGS...: a `vsync-probe follow --json` client in the background.
follow() {
  name=$1; shift
  "$VSYNC_BIN/vsync-probe" follow --socket "$VSYNCD_SOCK" --json "$@" >"/tmp/c.$name.out" 2>"/tmp/c.$name.err" &
  eval "PID_$name=$!"
  CLIENTS="${CLIENTS:-} $name"
}

# page NAME ARGS...: a `vsync-probe page --json` client (page-only: reads the timing page, no
# ticks) in the background.
page() {
  name=$1; shift
  "$VSYNC_BIN/vsync-probe" page --socket "$VSYNCD_SOCK" --json "$@" >"/tmp/c.$name.out" 2>"/tmp/c.$name.err" &
  eval "PID_$name=$!"
  CLIENTS="${CLIENTS:-} $name"
}

# raw NAME FPS [--never-read]: Tests/TestBed/guest-vsyncd-client.py (prints display events too).
raw() {
  name=$1; shift
  python3 "$GUEST_CLIENT" "$VSYNCD_SOCK" "$@" >"/tmp/c.$name.out" 2>"/tmp/c.$name.err" &
  eval "PID_$name=$!"
  CLIENTS="${CLIENTS:-} $name"
}

# The lines of FILE as they come (from the first), after a first line holding the reader's pid:
# kill it with SIGPIPE when done (the one signal shells do not report). tail -F blocks on the file
# (inotify) where a loop would poll it: in a TCG guest, forking a few processes 20 times a second
# is load of its own, in the very windows the tests measure. (A file not there yet is made empty
# first: tail notices a file appearing only once a second, its writer's truncation at once.)
follow_file() { [ -e "$1" ] || : >>"$1"; sh -c 'echo $$; exec tail -n +1 -F "$1" 2>/dev/null' sh "$1"; }

# wait_ticks NAME N: until client NAME printed N lines (30 s at most).
wait_ticks() {
  follow_file "/tmp/c.$1.out" | {
    read -r reader
    [ "$(timeout 30 head -n "$2" | wc -l)" -ge "$2" ]; found=$?
    kill -PIPE "$reader" 2>/dev/null; exit $found
  } || { echo "@@error $1 printed fewer than $2 lines"; return 1; }
}

# wait_line NAME PATTERN [N]: until client NAME printed N lines (default 1) matching PATTERN
# (grep -E), 30 s at most.
wait_line() {
  follow_file "/tmp/c.$1.out" | {
    read -r reader
    [ "$(timeout 30 grep -m "${3:-1}" -cE "$2")" -ge "${3:-1}" ]; found=$?
    kill -PIPE "$reader" 2>/dev/null; exit $found
  } || { echo "@@error $1 printed fewer than ${3:-1} lines matching $2"; return 1; }
}

# wait_connector NAME enabled|disabled: until the kernel says connector NAME is driven by a CRTC
# or not (sysfs `enabled`), 30 s at most, then @@kernel.STATE NAME NS. For what the kernel does
# on its own after a step, when its worker gets to it (the fbdev client after a hotplug: seconds
# under TCG on a loaded host), so a script waits for the kernel instead of guessing its time.
# Read with the shell's own `read` five times a second: no process forked but sleep.
wait_connector() {
  for f in /sys/class/drm/card*-"$1"/enabled; do :; done
  i=0 state=
  while read -r state <"$f" 2>/dev/null; [ "$state" != "$2" ]; do
    i=$((i + 1)); [ $i -gt 150 ] && { echo "@@error connector $1 not $2 after 30 s (sysfs says '$state')"; return 1; }
    sleep 0.2
  done
  echo "@@kernel.$2 $1 $(mono_ns)"
}

# stop NAME [SIGNAL]: SIGINT by default (follow then prints its summary); waits for it.
stop() {
  eval "pid=\$PID_$1"
  # shellcheck disable=SC2154 # set by the eval above
  kill -"${2:-INT}" "$pid" 2>/dev/null
  wait "$pid"
  echo "@@$1.status $?"
}

# modeset STEPS...: vkms-modeset in the foreground, each line it prints stamped with the time.
modeset() {
  "$VSYNC_TOOLS/vkms-modeset" "$@" 2>&1 | while read -r line; do echo "@@modeset $(mono_ns) $line"; done
}

# dump: every client's output and the daemon's log, tagged.
dump() {
  for name in ${CLIENTS:-}; do
    sed "s/^/@@$name /" "/tmp/c.$name.out"
    sed "s/^/@@$name.err /" "/tmp/c.$name.err"
  done
  sed 's/^/@@vsyncd.log /' "$VSYNCD_LOG"
}

# hold STEP: vkms-modeset holds STEP in the background until release; returns once it is set.
hold() {
  "$VSYNC_TOOLS/vkms-modeset" --hold 600 "$@" >/tmp/hold.out 2>&1 &
  HOLD=$!
  i=0
  while ! grep -q '^vkms-modeset: ' /tmp/hold.out; do
    i=$((i + 1)); [ $i -gt 600 ] && { echo "@@error vkms-modeset $* did not answer"; return 1; }
    sleep 0.05
  done
  sed "s/^/@@modeset $(mono_ns) /" /tmp/hold.out
}

release() { kill "$HOLD"; wait "$HOLD"; }
