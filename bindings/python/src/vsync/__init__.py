"""Frame ticks from vsyncd (the display's real vertical blanks): CADisplayLink for Linux, in
Python, over libvsync with ctypes (no compiled extension).

    import vsync

    with vsync.Client() as client:                    # $VSYNCD_SOCKET, else /run/vsyncd/vsyncd.sock
        for frame in client.frames(fps=30):           # blocking iterator, 30 fps (60, 30, 20 ... on 60 Hz)
            print(frame.sequence, frame.timestamp_ns, frame.target_timestamp_ns)

    async def main():                                 # asyncio: the client's fd in loop.add_reader
        with vsync.Client() as client:
            async for frame in client.aframes(fps=30):
                ...

Errors raise VsyncError (or a subclass per cause) whose str() is libvsync's one line saying what
failed and what to do; .errno is the errno value.
"""
import asyncio
import collections
import ctypes
import os

from . import _lib
from ._errors import (_FATAL, ConnectionLostError, DisplayGoneError, InvalidArgumentError, NoDaemonError,
                      NoDisplayError, NoTimingPageError, NotOnTimingPageError, PermissionDeniedError, TimedOutError,
                      VsyncError, _error)
from ._lib import lib
from ._reasons import FrameCounts, FrameReason
from ._types import _KINDS, Display, DisplayEvent, DisplayTiming, Frame, _text

__all__ = [
    "Client", "Link", "Frame", "Display", "DisplayEvent", "VsyncError", "NoDaemonError", "PermissionDeniedError",
    "ConnectionLostError", "NoDisplayError", "DisplayGoneError", "InvalidArgumentError", "TimedOutError",
    "library_version", "now_ns", "DisplayTiming", "NoTimingPageError", "NotOnTimingPageError", "FrameReason",
    "FrameCounts",
]


def library_version():
    """The library's (major, minor, micro)."""
    v = lib().vsync_version()
    return (v >> 16, (v >> 8) & 0xFF, v & 0xFF)


def now_ns():
    """CLOCK_MONOTONIC now, in ns: the clock of every timestamp."""
    return lib().vsync_now_ns()


class _Handle:
    """A libvsync object owned by a Python one: closed by close(), a with block's end, or the
    garbage collector, once. Subclasses name the destroy call in _destroy."""

    _raw = None

    def _destroy(self, raw):
        raise NotImplementedError

    def close(self):
        if self._raw is not None:
            raw, self._raw = self._raw, None
            self._destroy(raw)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        # At interpreter exit the module may be half torn down: then the process frees it all.
        try:
            if self._raw is not None:
                raw, self._raw = self._raw, None
                self._destroy(raw)
        except Exception:  # noqa: BLE001
            pass


class Client(_Handle):
    """One connection to vsyncd. It owns no thread: poll fileno() in your loop and call
    dispatch(0) when it is readable, or use frames() / aframes()."""

    def __init__(self, socket=None):
        self._raw = None
        raw = ctypes.c_void_p()
        path = os.fsencode(socket) if socket is not None else None
        rc = lib().vsync_client_connect(path, ctypes.byref(raw))
        if rc < 0:
            raise _error(rc, lib().vsync_client_last_error(None).decode(errors="replace"))
        self._raw = raw
        self._pending = None   # an exception a callback raised, re-raised by dispatch
        self._readers = []     # asyncio waiters on this client's fd
        self._loop = None

    def fileno(self):
        """The fd to poll for reading; the same for the client's life."""
        self._check()
        return lib().vsync_client_get_fd(self._raw)

    def dispatch(self, timeout_ms=-1):
        """Waits up to timeout_ms (-1: until something happens; a signal ends it too), reads and
        runs the callbacks. Returns the frames delivered. Re-raises what a callback raised."""
        self._check()
        rc = lib().vsync_client_dispatch(self._raw, int(timeout_ms))
        pending, self._pending = self._pending, None
        if pending is not None:
            raise pending
        if rc < 0:
            raise self._error(rc)
        return rc

    def displays(self):
        """The displays vsyncd has, asked for now (waits up to 2 s)."""
        self._check()
        array = (_lib.RawDisplay * _lib.MAX_DISPLAYS)()
        rc = lib().vsync_client_get_displays(self._raw, array, _lib.MAX_DISPLAYS, ctypes.sizeof(_lib.RawDisplay))
        if rc < 0:
            raise self._error(rc)
        return [Display(d.display_id, _text(d.name), d.state == _lib.DISPLAY_STATE_ON, d.refresh_mhz, d.period_ns,
                        d.width, d.height, d.crtc_id, d.connector_id, d.flags, _text(d.device_path),
                        _text(d.bus_path), _text(d.edid_make), _text(d.edid_model), _text(d.edid_serial),
                        d.generation, d.residual_rms_ns, d.residual_p99_ns, d.residual_samples,
                        d.min_interval_ns, d.max_interval_ns)
                for d in array[:min(rc, _lib.MAX_DISPLAYS)]]

    def display_timing(self, display_id, after_ns=0):
        """The display's last vblank and refresh model from vsyncd's timing page (protocol 5), read
        with no syscall, and the first vblank after after_ns (0: now) in next_sequence/next_ns.
        Raises NoTimingPageError (no page: not connected, or vsyncd without protocol 5),
        NotOnTimingPageError (display not on the page), VsyncError with errno EAGAIN (its record
        stayed locked). A link with set_page_only(True) keeps the record current."""
        self._check()
        raw = _lib.RawDisplayTiming()
        rc = lib().vsync_display_timing(self._raw, int(display_id), int(after_ns), ctypes.byref(raw))
        if rc < 0:
            raise _error(rc)  # the read records no error line: libvsync's line for the code
        return DisplayTiming._from(raw)

    def link(self, on_frame, display=None):
        """A link to one display (None or "primary", a connector name, "crtc:ID", "display:ID");
        on_frame(Frame) runs once per frame inside dispatch."""
        return Link(self, on_frame, display)

    def frames(self, fps=0, display=None, on_error=None):
        """A blocking iterator of frames at about fps (0: the display's full rate). Errors after
        which no frame comes (no such display, display gone) are raised; others (the daemon
        restarting) go to on_error(VsyncError) if given, and the client reconnects by itself."""
        queue, errors = collections.deque(), []
        link = self.link(queue.append, display)
        link.on_error(lambda e: errors.append(e) if e.errno in _FATAL else (on_error and on_error(e)))
        try:
            link.set_rate(0, 0, fps)
            while True:
                while not queue:
                    if errors:
                        raise errors.pop(0)
                    self.dispatch(-1)
                yield queue.popleft()
        finally:
            link.close()

    async def aframes(self, fps=0, display=None, on_error=None):
        """frames() for asyncio: the client's fd goes into the running loop's add_reader, so the
        loop never blocks in libvsync. Several aframes() on one client share the reader."""
        loop = asyncio.get_running_loop()
        queue, errors, wake = collections.deque(), [], asyncio.Event()
        link = self.link(queue.append, display)
        link.on_error(lambda e: errors.append(e) if e.errno in _FATAL else (on_error and on_error(e)))
        self._add_reader(loop, wake)
        try:
            link.set_rate(0, 0, fps)
            while True:
                while not queue:
                    if errors:
                        raise errors.pop(0)
                    wake.clear()
                    await wake.wait()
                yield queue.popleft()
        finally:
            self._remove_reader(wake)
            link.close()

    def _add_reader(self, loop, wake):
        if not self._readers:
            self._loop = loop
            loop.add_reader(self.fileno(), self._readable)
            # A link just made is sent at the next dispatch; the fd is readable until then.
        self._readers.append(wake)

    def _remove_reader(self, wake):
        self._readers.remove(wake)
        if not self._readers and self._raw is not None and self._loop is not None:
            self._loop.remove_reader(self.fileno())
            self._loop = None

    def _readable(self):
        try:
            self.dispatch(0)
        finally:
            for wake in self._readers:
                wake.set()

    def last_error(self):
        """The last error's whole line, or ""."""
        self._check()
        return lib().vsync_client_last_error(self._raw).decode(errors="replace")

    def _error(self, rc):
        return _error(rc, self.last_error())

    def _check(self):
        if self._raw is None:
            raise VsyncError(_lib.ENOTCONN, "the client is closed")

    def close(self):
        """Closes the connection. Links still open become dead (their calls raise); closing them
        later is safe."""
        if self._raw is not None and getattr(self, "_loop", None) is not None:
            self._loop.remove_reader(self.fileno())
            self._loop = None
        super().close()

    def _destroy(self, raw):
        lib().vsync_client_destroy(raw)


class Link(_Handle):
    """A link to one display at one rate. close() (or the garbage collector) unsubscribes; any
    order of closing links and clients is safe."""

    def __init__(self, client, on_frame, display=None):
        client._check()
        self._client = client
        self._raw = None
        self._on_display = self._on_error = None

        def frame_trampoline(_link, frame, _user):
            self._guard(on_frame, Frame._from(frame.contents))

        # Kept referenced for the link's life: ctypes frees callbacks it no longer sees.
        self._frame_cb = _lib.FRAME_FN(frame_trampoline)
        self._display_cb = self._error_cb = None
        raw = ctypes.c_void_p()
        rc = lib().vsync_link_create(client._raw, display.encode() if display else None, self._frame_cb, None,
                                     ctypes.byref(raw))
        if rc < 0:
            raise client._error(rc)
        self._raw = raw

    def _guard(self, fn, arg):
        # An exception must not unwind into C: keep the first for dispatch to raise.
        if self._client._pending is not None:
            return
        try:
            fn(arg)
        except BaseException as e:  # noqa: BLE001 - re-raised by dispatch
            self._client._pending = e

    def _call(self, rc):
        if rc < 0:
            raise self._client._error(rc) if self._client._raw is not None else _error(rc)
        return rc

    def set_rate(self, min_fps=0, max_fps=0, preferred_fps=0):
        """The rates the link accepts, like CAFrameRateRange (all 0: the display's full rate)."""
        self._call(lib().vsync_link_set_rate(self._raw, min_fps, max_fps, preferred_fps))

    def set_paused(self, paused):
        self._call(lib().vsync_link_set_paused(self._raw, bool(paused)))

    def set_work_duration(self, seconds):
        """Woken this long before each target vblank (at most 1 s; 0: just after each vblank)."""
        self._call(lib().vsync_link_set_work_duration(self._raw, int(seconds * 1e9)))

    def set_predict_while_off(self, on):
        self._call(lib().vsync_link_set_predict_while_off(self._raw, bool(on)))

    def set_hardware_ticks(self, on):
        """Every frame from a real vblank, never model-timed, even under vsyncd's sparse vblank
        sampling (protocol 6). Keeps the display's vblank interrupt on (a laptop panel cannot
        self-refresh): for a frame-timing tool or a test, not for apps."""
        self._call(lib().vsync_link_set_hardware_ticks(self._raw, bool(on)))

    def set_page_only(self, on):
        """Page only: no frames; vsyncd keeps the display's record on the timing page current."""
        self._call(lib().vsync_link_set_page_only(self._raw, bool(on)))

    def on_display(self, fn):
        """fn(DisplayEvent) on mode changes, off, on, variable refresh on/off, waiting."""
        def trampoline(_link, event, _user):
            e = event.contents
            # Protocol 5's fields only when the library filled them (struct_size).
            new = e.struct_size >= ctypes.sizeof(_lib.RawDisplayEvent)
            extra = (e.flags, e.min_interval_ns, e.max_interval_ns, e.monotonic_ns, e.realtime_ns) if new else ()
            self._guard(fn, DisplayEvent(_KINDS.get(e.kind, f"kind {e.kind}"), e.display_id, e.refresh_mhz,
                                         e.period_ns, e.generation, *extra))
        self._display_cb = _lib.DISPLAY_FN(trampoline)
        self._call(lib().vsync_link_set_display_callback(self._raw, self._display_cb))

    def on_error(self, fn):
        """fn(VsyncError) on the link's errors (connection lost, no such display, ...)."""
        def trampoline(_link, code, message, _user):
            self._guard(fn, _error(code, message.decode(errors="replace") if message else None))
        self._error_cb = _lib.ERROR_FN(trampoline)
        self._call(lib().vsync_link_set_error_callback(self._raw, self._error_cb))

    @property
    def refresh(self):
        """(refresh_mhz, period_ns) as vsyncd last said; zeros before it answered."""
        mhz, period = ctypes.c_uint64(), ctypes.c_uint64()
        self._call(lib().vsync_link_get_refresh(self._raw, ctypes.byref(mhz), ctypes.byref(period)))
        return mhz.value, period.value

    @property
    def max_fps(self):
        return self._call(lib().vsync_link_get_max_fps(self._raw))

    def frame_done(self, frame, work_end_ns=0):
        """Ends frame (one this link's callback got): its work ended at work_end_ns (now_ns()'s
        clock; 0: now). Returns its FrameReason. Once per frame, in order, on the dispatching thread."""
        raw = _lib.RawFrame.from_buffer_copy(frame._raw) if frame._raw else _lib.RawFrame()
        return FrameReason._from(self._call(lib().vsync_link_frame_done(self._raw, ctypes.byref(raw), work_end_ns)))

    def frame_counts(self):
        """The link's FrameCounts since it was created."""
        raw = _lib.RawFrameCounts(struct_size=ctypes.sizeof(_lib.RawFrameCounts))
        self._call(lib().vsync_link_get_frame_counts(self._raw, ctypes.byref(raw)))
        return FrameCounts(raw.frames, raw.late, {r: raw.by_reason[r] for r in FrameReason})

    def _destroy(self, raw):
        lib().vsync_link_destroy(raw)
