#!/usr/bin/env python3
"""Print frame ticks from vsyncd at a chosen rate, through libvsync with ctypes.

    python3 vsync_ticks.py [--fps N] [--frames N] [--display NAME] [--socket PATH]

The library is found as libvsync.so.1 on the loader's path, or at $VSYNC_LIB. The loop is a
plain select() on the client's fd, the shape any Python event loop (asyncio's add_reader,
GLib's io_add_watch) takes.
"""
import argparse
import ctypes
import os
import select
import sys


class Timeline(ctypes.Structure):
    _fields_ = [("sequence", ctypes.c_uint64), ("presentation_ns", ctypes.c_uint64)]


class Frame(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("display_id", ctypes.c_uint32),
        ("sequence", ctypes.c_uint64),
        ("timestamp_ns", ctypes.c_uint64),
        ("target_timestamp_ns", ctypes.c_uint64),
        ("duration_ns", ctypes.c_uint64),
        ("skipped", ctypes.c_uint32),
        ("flags", ctypes.c_uint32),
        ("interval_ns", ctypes.c_uint64),
        ("received_ns", ctypes.c_uint64),
        ("divisor", ctypes.c_uint32),
        ("reserved", ctypes.c_uint32),
        ("target_sequence", ctypes.c_uint64),
        ("timeline_count", ctypes.c_uint32),
        ("reserved2", ctypes.c_uint32),
        ("timelines", Timeline * 4),
        ("generation", ctypes.c_uint32),  # after 0.3.0: changes with mode, on/off, model reset
        ("reserved3", ctypes.c_uint32),
    ]


FRAME_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.POINTER(Frame), ctypes.c_void_p)
ERROR_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)
FLAGS = {1: "hardware", 2: "predicted", 4: "synthetic"}


def load():
    lib = ctypes.CDLL(os.environ.get("VSYNC_LIB", "libvsync.so.1"))
    lib.vsync_client_connect.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]
    lib.vsync_client_get_fd.argtypes = [ctypes.c_void_p]
    lib.vsync_client_dispatch.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.vsync_client_last_error.argtypes = [ctypes.c_void_p]
    lib.vsync_client_last_error.restype = ctypes.c_char_p
    lib.vsync_client_destroy.argtypes = [ctypes.c_void_p]
    lib.vsync_link_create.argtypes = [ctypes.c_void_p, ctypes.c_char_p, FRAME_FN, ctypes.c_void_p,
                                      ctypes.POINTER(ctypes.c_void_p)]
    lib.vsync_link_set_rate.argtypes = [ctypes.c_void_p, ctypes.c_double, ctypes.c_double, ctypes.c_double]
    lib.vsync_link_set_error_callback.argtypes = [ctypes.c_void_p, ERROR_FN]
    lib.vsync_link_get_max_fps.argtypes = [ctypes.c_void_p]
    lib.vsync_link_destroy.argtypes = [ctypes.c_void_p]
    lib.vsync_strerror.argtypes = [ctypes.c_int]
    lib.vsync_strerror.restype = ctypes.c_char_p
    lib.vsync_now_ns.restype = ctypes.c_uint64
    return lib


def main():
    parser = argparse.ArgumentParser(description="Print frame ticks from vsyncd through libvsync.")
    parser.add_argument("--fps", type=float, default=0, help="preferred rate; 0 = the display's maximum")
    parser.add_argument("--frames", type=int, default=0, help="stop after N frames; 0 = run until Ctrl-C")
    parser.add_argument("--display", default=None, help="primary, a connector name, crtc:ID or display:ID")
    parser.add_argument("--socket", default=None, help="vsyncd's socket (default $VSYNCD_SOCKET, then /run/vsyncd/vsyncd.sock)")
    args = parser.parse_args()

    try:
        lib = load()
    except OSError as e:
        sys.exit(f"vsync_ticks: cannot load libvsync ({e}): install it, or point VSYNC_LIB at libvsync.so.1")

    client = ctypes.c_void_p()
    if lib.vsync_client_connect(args.socket.encode() if args.socket else None, ctypes.byref(client)) < 0:
        sys.exit(f"vsync_ticks: {lib.vsync_client_last_error(None).decode()}")

    seen = 0

    def on_frame(link, frame_ptr, user):
        nonlocal seen
        f = frame_ptr.contents
        latency_us = (lib.vsync_now_ns() - f.timestamp_ns) // 1000
        flags = "|".join(name for bit, name in FLAGS.items() if f.flags & bit)
        print(f"seq {f.sequence}  t {f.timestamp_ns / 1e9:.6f}  target {f.target_timestamp_ns / 1e9:.6f}  "
              f"interval {f.interval_ns / 1e6:.3f} ms  divisor {f.divisor}  skipped {f.skipped}  flags {flags}  "
              f"latency {latency_us} us", flush=True)
        seen += 1

    def on_error(link, code, message, user):
        print(f"vsync_ticks: {message.decode()}", file=sys.stderr, flush=True)

    # Kept referenced for as long as the link lives: ctypes frees callbacks it no longer sees.
    frame_cb, error_cb = FRAME_FN(on_frame), ERROR_FN(on_error)
    link = ctypes.c_void_p()
    if lib.vsync_link_create(client, args.display.encode() if args.display else None, frame_cb, None, ctypes.byref(link)) < 0:
        sys.exit(f"vsync_ticks: {lib.vsync_client_last_error(client).decode()}")
    lib.vsync_link_set_error_callback(link, error_cb)
    rc = lib.vsync_link_set_rate(link, 0, 0, args.fps)
    if rc < 0:
        sys.exit(f"vsync_ticks: --fps {args.fps}: {lib.vsync_client_last_error(client).decode()}")

    fd = lib.vsync_client_get_fd(client)
    try:
        while args.frames == 0 or seen < args.frames:
            select.select([fd], [], [])
            rc = lib.vsync_client_dispatch(client, 0)
            if rc < 0:
                sys.exit(f"vsync_ticks: {lib.vsync_strerror(rc).decode()}")
    except KeyboardInterrupt:
        pass
    print(f"{seen} frames; display max {lib.vsync_link_get_max_fps(link)} fps")
    lib.vsync_link_destroy(link)
    lib.vsync_client_destroy(client)


if __name__ == "__main__":
    main()
