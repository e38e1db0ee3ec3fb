"""The package against a real vsyncd on its timer source (60 Hz)."""
import asyncio
import contextlib
import ctypes
import gc
import itertools
import subprocess
import sys
import time

import pytest

import vsync
from vsync import _lib

from conftest import REPO


def steps_at(frames, divisor):
    """Each step a whole number of frames at the divisor's rate."""
    assert all(f.divisor == divisor and f.sequence % divisor == 0 for f in frames), frames
    for a, b in zip(frames, frames[1:]):
        assert b.sequence - a.sequence == divisor * (1 + b.skipped), (a, b)


def test_blocking_iterator_at_the_chosen_rate(daemon):
    with vsync.Client(daemon) as client:
        frames = list(itertools.islice(client.frames(fps=20), 8))
    steps_at(frames, 3)
    assert all(f.synthetic and f.interval_ns == 3 * f.duration_ns for f in frames)
    assert frames[0].timelines[0] == (frames[0].target_sequence, frames[0].target_timestamp_ns)


def test_asyncio_through_add_reader(daemon):
    async def main():
        with vsync.Client(daemon) as client:
            got = []
            # aclosing: an async generator left by break is closed now, not when the loop collects it.
            async with contextlib.aclosing(client.aframes(fps=30)) as frames:
                async for frame in frames:
                    got.append(frame)
                    if len(got) == 6:
                        break
            # The loop's reader is gone with the last iterator.
            assert client._loop is None
            return got

    steps_at(asyncio.run(main()), 2)


def test_two_async_iterators_share_the_client(daemon):
    async def take(client, fps, n):
        out = []
        async with contextlib.aclosing(client.aframes(fps=fps)) as frames:
            async for frame in frames:
                out.append(frame)
                if len(out) == n:
                    return out

    async def main():
        with vsync.Client(daemon) as client:
            return await asyncio.gather(take(client, 60, 8), take(client, 15, 3))

    full, quarter = asyncio.run(main())
    steps_at(full, 1)
    steps_at(quarter, 4)


def test_errors_carry_the_line(tmp_path, daemon):
    missing = tmp_path / "none.sock"
    with pytest.raises(vsync.NoDaemonError) as caught:
        vsync.Client(missing)
    assert caught.value.errno == 111 and str(caught.value).startswith(f"no vsyncd at {missing}")
    assert isinstance(caught.value, ConnectionRefusedError)
    with vsync.Client(daemon) as client:
        with pytest.raises(vsync.InvalidArgumentError, match=r"'crtc:0': expected a number above 0"):
            client.link(lambda f: None, "crtc:0")
        link = client.link(lambda f: None)
        with pytest.raises(vsync.InvalidArgumentError, match=r"^vsync_link_set_rate: "):
            link.set_rate(40, 10, 0)
        link.close()
        # A display that is not there ends the iterator with its error.
        with pytest.raises(vsync.NoDisplayError, match=r"^no display display 99"):
            next(client.frames(display="display:99"))


def test_an_exception_in_a_callback_comes_out_of_dispatch(daemon):
    with vsync.Client(daemon) as client:
        def boom(frame):
            raise RuntimeError(f"frame {frame.sequence} hurt")
        link = client.link(boom)
        with pytest.raises(RuntimeError, match=r"^frame \d+ hurt$"):
            for _ in range(100):
                client.dispatch(100)
        link.close()
        # The client still works.
        assert len(list(itertools.islice(client.frames(), 2))) == 2


def test_displays_and_version(daemon):
    with vsync.Client(daemon) as client:
        (display,) = client.displays()
    assert (display.name, display.on, display.refresh_mhz, display.primary) == ("timer", True, 60000, True)
    assert display.device_path == "" and display.edid_model == ""
    # The timer source has no variable refresh (protocol 5): neither on nor capable, no range.
    assert not display.variable and not display.variable_capable
    assert (display.min_interval_ns, display.max_interval_ns) == (0, 0)
    assert vsync.library_version() == (0, 3, 0)


def test_closing_in_any_order(daemon):
    client = vsync.Client(daemon)
    a = client.link(lambda f: None)
    b = client.link(lambda f: None)
    list(itertools.islice(client.frames(), 2))
    client.close()                     # first the client, as a finalizer may
    with pytest.raises(vsync.VsyncError) as caught:
        a.set_rate(0, 0, 30)
    assert caught.value.errno == 107   # ENOTCONN: a dead link, not freed memory
    a.close()
    del b
    gc.collect()


def test_ctypes_layouts_match_the_header(tmp_path):
    """The ctypes structs against a C program compiled with the header."""
    source = tmp_path / "layout.c"
    structs = {"vsync_frame": _lib.RawFrame, "vsync_display_event": _lib.RawDisplayEvent,
               "vsync_display": _lib.RawDisplay, "vsync_frame_timeline": _lib.Timeline,
               "vsync_frame_counts": _lib.RawFrameCounts}
    lines = ["#include <stddef.h>", "#include <stdio.h>", "#include <vsync/vsync.h>", "int main(void) {"]
    for name, cls in structs.items():
        lines.append(f'printf("{name} %zu\\n", sizeof(struct {name}));')
        lines += [f'printf("{name}.{f} %zu\\n", offsetof(struct {name}, {f}));' for f, _ in cls._fields_]
    constants = {n: getattr(_lib, n[len("VSYNC_"):]) for n in (
        "VSYNC_ENODAEMON", "VSYNC_EACCES", "VSYNC_ECONNECT", "VSYNC_ECONNLOST", "VSYNC_EREFUSED", "VSYNC_ENODISPLAY",
        "VSYNC_EDISPLAYGONE", "VSYNC_EREQUEST", "VSYNC_EPROTO", "VSYNC_EINVAL", "VSYNC_ENOMEM", "VSYNC_ETIMEDOUT",
        "VSYNC_ENOTCONN", "VSYNC_EBUSY", "VSYNC_FRAME_HARDWARE", "VSYNC_FRAME_PREDICTED", "VSYNC_FRAME_SYNTHETIC",
        "VSYNC_FRAME_VARIABLE", "VSYNC_FRAME_MODEL_TIMED", "VSYNC_DISPLAY_VARIABLE_REFRESH_CHANGED", "VSYNC_DISPLAY_FLAG_VARIABLE",
        "VSYNC_DISPLAY_FLAG_VARIABLE_CAPABLE",
        "VSYNC_DISPLAY_MODE_CHANGED", "VSYNC_DISPLAY_OFF", "VSYNC_DISPLAY_ON", "VSYNC_DISPLAY_WAITING",
        "VSYNC_DISPLAY_STATE_OFF", "VSYNC_DISPLAY_STATE_ON", "VSYNC_DISPLAY_FLAG_HARDWARE_CLOCK",
        "VSYNC_DISPLAY_FLAG_SYNTHETIC", "VSYNC_DISPLAY_FLAG_PRIMARY", "VSYNC_DISPLAY_FLAG_INTERRUPT_TIMESTAMPS",
        "VSYNC_MAX_DISPLAYS")}
    constants.update({f"VSYNC_REASON_{r.name}": int(r) for r in vsync.FrameReason})
    lines += [f'printf("{n} %lld\\n", (long long)({n}));' for n in constants]
    source.write_text("\n".join(lines + ["return 0; }"]) + "\n")
    exe = tmp_path / "layout"
    subprocess.run(["cc", "-I", str(REPO / "include"), str(source), "-o", str(exe)], check=True)
    c = dict(line.rsplit(" ", 1) for line in subprocess.run([str(exe)], capture_output=True, text=True,
                                                             check=True).stdout.splitlines())
    py = {}
    for name, cls in structs.items():
        py[name] = ctypes.sizeof(cls)
        py.update({f"{name}.{f}": getattr(cls, f).offset for f, _ in cls._fields_})
    py.update(constants)
    assert {k: int(v) for k, v in c.items()} == py


def test_the_example_prints_ticks_at_its_rate(daemon):
    example = REPO / "bindings/python/examples/ticks.py"
    out = subprocess.run([sys.executable, str(example), "--socket", str(daemon), "--fps", "30", "--frames", "5"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    ticks = [line for line in out.stdout.splitlines() if line.startswith("seq ")]
    assert len(ticks) == 5 and all(" divisor 2 " in t for t in ticks), out.stdout
    assert out.stdout.splitlines()[-1] == "5 frames; display 60.000 Hz (max 60 fps)", out.stdout


def test_frames_whose_work_overruns_are_app_deadline_missed(daemon):
    """Every fourth frame's work lasts a period and 2 ms from the tick's receipt, longer than the
    period it had: exactly those are APP_DEADLINE_MISSED. The others take no time: on time when their
    tick came in time (right after the last one, read by its target); held back, the app's only
    after its own overrun. The counts are the verdicts'."""
    reason = vsync.FrameReason
    with vsync.Client(daemon) as client:
        latest = []
        link = client.link(latest.append)
        verdicts = []
        while len(verdicts) < 24:
            client.dispatch(100)
            if not latest:
                continue
            frame = latest.pop()
            latest.clear()
            overran = len(verdicts) % 4 == 1
            in_time = frame.skipped == 0 and frame.received_ns <= frame.target_timestamp_ns
            end = frame.received_ns + frame.duration_ns + 2_000_000 if overran else frame.received_ns
            time.sleep(max(0, end - vsync.now_ns()) / 1e9)
            verdicts.append((overran, in_time, link.frame_done(frame, end)))
        for i, (overran, in_time, r) in enumerate(verdicts):
            # Held back by the app's own overrun just before it, a frame is the app's.
            after_overrun = {reason.APP_DEADLINE_MISSED} if i > 0 and verdicts[i - 1][0] else set()
            expected = ({reason.APP_DEADLINE_MISSED} if overran else {reason.ON_TIME} if in_time
                        else {reason.ON_TIME, reason.DELIVERY_LATE, reason.DAEMON_LATE} | after_overrun)
            assert r in expected, (i, verdicts)
        assert sum(1 for o, t, _ in verdicts if not o and t) >= 12, verdicts
        counts = link.frame_counts()
        on_time = sum(1 for *_, r in verdicts if r is reason.ON_TIME)
        assert (counts.frames, counts.late) == (24, 24 - on_time)
        missed = sum(1 for *_, r in verdicts if r is reason.APP_DEADLINE_MISSED)
        assert counts.by_reason[reason.APP_DEADLINE_MISSED] == missed and counts.by_reason[reason.ON_TIME] == on_time
        assert reason.APP_DEADLINE_MISSED.label == "appDeadlineMissed"
        # A frame is judged once.
        with pytest.raises(vsync.InvalidArgumentError):
            link.frame_done(frame)


def test_hardware_ticks_keep_frames_off_the_model_until_turned_off(sparse_daemon):
    """Under sparse vblank sampling, hardware ticks keep the display's vblank events on: no frame is
    model-timed over 150 frames, past the model's learning and a 2 s burst interval (without them
    most are). Turned off on the running link, model-timed frames come."""
    with vsync.Client(sparse_daemon) as client:
        frames = []
        link = client.link(frames.append)
        link.set_hardware_ticks(True)
        deadline = time.monotonic() + 10
        while len(frames) < 150 and time.monotonic() < deadline:
            client.dispatch(100)
        assert len(frames) >= 150 and not any(f.model_timed for f in frames), frames
        link.set_hardware_ticks(False)
        frames.clear()
        deadline = time.monotonic() + 10
        while not any(f.model_timed for f in frames) and time.monotonic() < deadline:
            client.dispatch(100)
        assert any(f.model_timed for f in frames), frames
