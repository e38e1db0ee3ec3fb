#!/usr/bin/env python3
"""Writes the synthetic VRR traces of Tests/Traces (trace format 2, README "Record and replay").

Deterministic: a fixed linear congruential generator, no system randomness, so running it again
writes the same bytes (ReplayTraceTests checks nothing about how they were made, only what the
daemon does with them). Run from anywhere: python3 Tests/Traces/make-vrr-traces.py

The display: 2560x1440 at exactly 144 Hz (597.312 MHz over 2720 x 1525), a monitor whose EDID
range limits say 48-144 Hz. Under VRR a vblank comes when the game's frame is ready, no sooner
than 1/144 s after the last one; when no frame comes for 1/48 s the display scans out the old
frame again (as amdgpu's below-the-range frame doubling does), so intervals stay in the range.
"""
import os

SHORTEST = 1e9 / 144
LONGEST = 1e9 / 48
START = 5_000_000_000          # CLOCK_MONOTONIC of the first line, ns
FIRST_SEQUENCE = 1000


class LCG:
    """Numerical Recipes' 32-bit LCG: enough spread for frame times, identical everywhere."""
    def __init__(self, seed):
        self.state = seed & 0xFFFFFFFF

    def uniform(self):
        self.state = (1664525 * self.state + 1013904223) & 0xFFFFFFFF
        return self.state / 2**32


def header(lines, what):
    lines.append("vsync-trace 2")
    lines.append("# SYNTHETIC: " + what)
    lines.append("# made by Tests/Traces/make-vrr-traces.py (deterministic LCG; see its docstring)")
    lines.append("display 1 /dev/dri/card0 80 DP-1")
    lines.append(f"mode {START} 1 2560x1440 144/1")
    lines.append(f"vrr-capable {START} 1 1")
    lines.append(f"vrr-range {START} 1 48 144")


def game_vblanks(rng, t, seq, until, lines, stutter):
    """VRR vblanks of a game whose frames take 6.9-25 ms (a few 40 ms hitches if `stutter`)."""
    while t < until:
        frame = 6.9e6 + rng.uniform() * 18.1e6
        if stutter and rng.uniform() < 0.03:
            frame = 40e6
        ready = t + max(frame, SHORTEST)
        # No new frame within the longest interval: the old one is scanned out again.
        while ready - t > LONGEST:
            t += LONGEST
            seq += 1
            lines.append(f"vblank 1 {seq} {round(t)}")
        t = max(ready, t + SHORTEST)  # a frame ready just after a repeat waits out the shortest interval
        seq += 1
        lines.append(f"vblank 1 {seq} {round(t)}")
    return t, seq


def fixed_vblanks(t, seq, until, lines):
    """Vblanks on the 144 Hz grid (VRR off)."""
    base = t
    k = 0
    while t < until:
        k += 1
        t = base + k * SHORTEST
        seq += 1
        lines.append(f"vblank 1 {seq} {round(t)}")
    return t, seq


def stutter_trace():
    lines = []
    header(lines, "VRR on throughout (48-144 Hz) with a game's frame times, 6.9-25 ms and about "
                  "3 % hitches of 40 ms (frames repeated at the 20.8 ms longest interval meanwhile); 6 s")
    lines.append(f"vrr-enabled {START} 1 1")
    rng = LCG(23)
    game_vblanks(rng, float(START + 10_000_000), FIRST_SEQUENCE, START + 6e9, lines, stutter=True)
    return lines


def toggle_trace():
    lines = []
    header(lines, "144 Hz, VRR off 1.2 s, on 1.2 s (a game at 6.9-25 ms), off 1.2 s, on 1.2 s, "
                  "off 1.2 s: four toggles of VRR_ENABLED, each 1 ms after a vblank")
    lines.append(f"vrr-enabled {START} 1 0")
    rng = LCG(5)
    t, seq = float(START + 10_000_000), FIRST_SEQUENCE
    lines.append(f"vblank 1 {seq} {round(t)}")
    for phase in range(5):
        until = t + 1.2e9
        if phase % 2 == 0:
            t, seq = fixed_vblanks(t, seq, until, lines)
        else:
            t, seq = game_vblanks(rng, t, seq, until, lines, stutter=False)
        if phase < 4:
            lines.append(f"vrr-enabled {round(t) + 1_000_000} 1 {1 if phase % 2 == 0 else 0}")
    return lines


here = os.path.dirname(os.path.abspath(__file__))
for name, lines in [("vrr-game-stutter.trace", stutter_trace()), ("vrr-toggle.trace", toggle_trace())]:
    with open(os.path.join(here, name), "w") as f:
        f.write("\n".join(lines) + "\n")
