#!/usr/bin/env python3
"""A raw vsyncd protocol client for the VM tests (docs/PROTOCOL.md), run inside the guest.

    guest-vsyncd-client.py SOCKET FPS [--never-read]
    guest-vsyncd-client.py SOCKET --wait-listen

Handshakes, subscribes to the primary display at FPS (0 = full rate) and prints one JSON object
per server message on stdout, each with recvNs (CLOCK_MONOTONIC when it was read):
  {"type":"subscribed","divisor":..,"intervalNs":..,"clientIntervalNs":..,"mhz":..,"recvNs":..}
  {"type":"event","kind":"off|on|modeChanged|added|removed","mhz":..,"state":..,"recvNs":..}
  {"type":"tick","seq":..,"timestampNs":..,"targetTimestampNs":..,"durationNs":..,
   "clientIntervalNs":..,"skipped":..,"divisor":..,"flags":..,"recvNs":..}
  {"type":"error","code":..,"text":..}
It exists because `vsync-probe follow` prints ticks only, not display events. With --never-read
it subscribes, prints {"type":"sleeping"} and then never reads its socket again (a stuck client).
Runs until killed or until the daemon closes the connection ({"type":"closed"}).
With --wait-listen it prints {"type":"polling"}, tries to connect every 5 ms, prints
{"type":"listening","recvNs":..} as soon as a connect succeeds (the daemon's socket is up), then
handshakes and prints {"type":"serving","recvNs":..} when WELCOME comes (its loop runs).
"""
import json
import socket
import struct
import sys
import time

KINDS = {1: "modeChanged", 2: "off", 3: "on", 4: "added", 5: "removed"}


def now():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def emit(obj):
    print(json.dumps(obj), flush=True)


def wait_listen(path):
    emit({"type": "polling"})
    while True:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            s.connect(path)
            emit({"type": "listening", "recvNs": now()})
            s.send(struct.pack("<HHIIHH32s", 1, 48, 0, 0x4E595356, 1, 1, b"guest-vsyncd-poller"))
            s.recv(4096)
            emit({"type": "serving", "recvNs": now()})
            return 0
        except OSError:
            time.sleep(0.005)
        finally:
            s.close()


def main():
    if sys.argv[2] == "--wait-listen":
        return wait_listen(sys.argv[1])
    path, fps = sys.argv[1], float(sys.argv[2])
    never_read = "--never-read" in sys.argv[3:]
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.connect(path)
    # HELLO: version range 1..1, magic "VSYN", client name.
    s.send(struct.pack("<HHIIHH32s", 1, 48, 0, 0x4E595356, 1, 1, b"guest-vsyncd-client"))
    welcome = s.recv(4096)
    if struct.unpack_from("<H", welcome)[0] != 0x101:
        emit({"type": "refused", "bytes": welcome.hex()})
        return 1
    # SUBSCRIBE id 1, primary display, range (0, 0, fps).
    s.send(struct.pack("<HHIIIBxxxI32sfff", 3, 68, 0, 1, 0, 0, 0, b"", 0, 0, fps))
    if never_read:
        emit({"type": "sleeping"})
        while True:
            time.sleep(3600)
    while True:
        m = s.recv(4096)
        t = now()
        if not m:
            emit({"type": "closed", "recvNs": t})
            return 0
        kind, = struct.unpack_from("<H", m)
        if kind == 0x105:
            _sub, _disp, seq, ts, target, dur, cdur, skipped, div, flags = struct.unpack_from("<IIQQQQQIII", m, 8)
            emit({"type": "tick", "seq": seq, "timestampNs": ts, "targetTimestampNs": target, "durationNs": dur,
                  "clientIntervalNs": cdur, "skipped": skipped, "divisor": div, "flags": flags, "recvNs": t})
        elif kind == 0x104:
            div, = struct.unpack_from("<I", m, 16)
            interval, cinterval = struct.unpack_from("<QQ", m, 24)
            mhz, = struct.unpack_from("<Q", m, 40 + 24)
            emit({"type": "subscribed", "divisor": div, "intervalNs": interval, "clientIntervalNs": cinterval,
                  "mhz": mhz, "recvNs": t})
        elif kind == 0x106:
            k, = struct.unpack_from("<H", m, 8)
            state, = struct.unpack_from("<B", m, 16 + 12)
            mhz, period = struct.unpack_from("<QQ", m, 16 + 24)
            emit({"type": "event", "kind": KINDS.get(k, str(k)), "state": state, "mhz": mhz, "periodNs": period,
                  "recvNs": t})
        elif kind == 0x107:
            code, = struct.unpack_from("<H", m, 8)
            emit({"type": "error", "code": code, "text": m[16:].split(b"\0")[0].decode("utf-8", "replace")})


if __name__ == "__main__":
    sys.exit(main())
