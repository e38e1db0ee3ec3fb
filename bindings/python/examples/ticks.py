#!/usr/bin/env python3
"""Print frame ticks from vsyncd at a chosen rate, with the vsync package.

    python3 ticks.py [--fps N] [--frames N] [--display NAME] [--socket PATH] [--asyncio]
"""
import argparse
import asyncio
import contextlib
import itertools
import sys

import vsync


def show(f):
    latency_us = (vsync.now_ns() - f.timestamp_ns) // 1000
    flags = "synthetic" if f.synthetic else "predicted" if f.predicted else "hardware"
    print(f"seq {f.sequence}  t {f.timestamp_ns / 1e9:.6f}  target {f.target_timestamp_ns / 1e9:.6f}  "
          f"interval {f.interval_ns / 1e6:.3f} ms  divisor {f.divisor}  skipped {f.skipped}  flags {flags}  "
          f"latency {latency_us} us", flush=True)


async def run_async(client, args):
    seen = 0
    async with contextlib.aclosing(client.aframes(fps=args.fps, display=args.display)) as frames:
        async for frame in frames:
            show(frame)
            seen += 1
            if seen == args.frames:
                break
    return seen


def main():
    parser = argparse.ArgumentParser(description="Print frame ticks from vsyncd.")
    parser.add_argument("--fps", type=float, default=0, help="preferred rate; 0 = the display's maximum")
    parser.add_argument("--frames", type=int, default=0, help="stop after N frames; 0 = run until Ctrl-C")
    parser.add_argument("--display", default=None, help="primary, a connector name, crtc:ID or display:ID")
    parser.add_argument("--socket", default=None, help="vsyncd's socket (default $VSYNCD_SOCKET, then /run/vsyncd/vsyncd.sock)")
    parser.add_argument("--asyncio", action="store_true", help="through asyncio's add_reader instead of blocking")
    args = parser.parse_args()
    try:
        with vsync.Client(args.socket) as client:
            if args.asyncio:
                seen = asyncio.run(run_async(client, args))
            else:
                frames = client.frames(fps=args.fps, display=args.display,
                                       on_error=lambda e: print(f"ticks: {e}", file=sys.stderr))
                seen = 0
                for frame in itertools.islice(frames, args.frames or None):
                    show(frame)
                    seen += 1
            refresh = client.displays()
            primary = next((d for d in refresh if d.primary), None)
            hz = primary.refresh_hz if primary else 0
            print(f"{seen} frames; display {hz:.3f} Hz (max {round(hz)} fps)")
    except vsync.VsyncError as e:
        sys.exit(f"ticks: {e}")
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
