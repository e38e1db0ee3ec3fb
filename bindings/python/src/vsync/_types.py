"""What the callbacks and queries hand out: frames, display events, displays."""
import dataclasses

from . import _lib


@dataclasses.dataclass(frozen=True)
class Frame:
    """One frame: the newest tick of a link in one dispatch. Times are CLOCK_MONOTONIC ns."""
    display_id: int
    sequence: int             # the newest vblank's sequence
    timestamp_ns: int         # when it happened (CADisplayLink timestamp)
    target_timestamp_ns: int  # the frame's deadline: the time of vblank target_sequence
    target_sequence: int
    duration_ns: int          # the display's frame interval
    interval_ns: int          # divisor * duration_ns
    skipped: int              # frames at the link's rate not delivered since the last one
    divisor: int
    flags: int
    received_ns: int
    timelines: tuple          # ((sequence, presentation_ns), ...): the target, then later vblanks
    generation: int = 0       # the display's configuration generation: changes with mode, on/off, model reset
    _raw: bytes = dataclasses.field(default=b"", repr=False, compare=False)  # the library's frame, for frame_done

    @property
    def synthetic(self):
        return bool(self.flags & _lib.FRAME_SYNTHETIC)

    @property
    def predicted(self):
        return bool(self.flags & _lib.FRAME_PREDICTED)

    @property
    def variable(self):
        """Variable refresh is on: target and timelines are the earliest the vblanks can come."""
        return bool(self.flags & _lib.FRAME_VARIABLE)

    @property
    def model_timed(self):
        """The display is on but vsyncd samples its vblanks sparsely (protocol 6): the timestamp
        is the refresh model's prediction. Never with Link.set_hardware_ticks(True)."""
        return bool(self.flags & _lib.FRAME_MODEL_TIMED)

    @classmethod
    def _from(cls, f):
        count = min(f.timeline_count, 4)
        return cls(f.display_id, f.sequence, f.timestamp_ns, f.target_timestamp_ns, f.target_sequence,
                   f.duration_ns, f.interval_ns, f.skipped, f.divisor, f.flags, f.received_ns,
                   tuple((t.sequence, t.presentation_ns) for t in f.timelines[:count]), f.generation, bytes(f))


@dataclasses.dataclass(frozen=True)
class DisplayEvent:
    kind: str                 # "mode_changed", "off", "on", "variable_refresh_changed", "waiting", or "kind N"
    display_id: int
    refresh_mhz: int
    period_ns: int
    generation: int = 0       # the display's configuration generation after the change
    flags: int = 0            # DISPLAY_FLAG_* after the change (protocol 5)
    min_interval_ns: int = 0  # variable refresh range as intervals; 0 when not capable
    max_interval_ns: int = 0
    monotonic_ns: int = 0     # CLOCK_MONOTONIC and CLOCK_REALTIME read together as vsyncd built it
    realtime_ns: int = 0

    @property
    def variable(self):
        return bool(self.flags & _lib.DISPLAY_FLAG_VARIABLE)


_KINDS = {_lib.DISPLAY_MODE_CHANGED: "mode_changed", _lib.DISPLAY_OFF: "off", _lib.DISPLAY_ON: "on",
          _lib.DISPLAY_VARIABLE_REFRESH_CHANGED: "variable_refresh_changed", _lib.DISPLAY_WAITING: "waiting"}


@dataclasses.dataclass(frozen=True)
class Display:
    """One display as vsyncd lists it; identity strings are "" when vsyncd does not know them."""
    id: int                   # the selector "display:ID"
    name: str                 # the connector ("HDMI-A-1"); "timer" for the timer source
    on: bool
    refresh_mhz: int          # exact refresh in millihertz; 0 if off
    period_ns: int
    width: int
    height: int
    crtc_id: int
    connector_id: int
    flags: int
    device_path: str          # "/dev/dri/card0"
    bus_path: str             # "pci-0000:00:02.0"
    edid_make: str
    edid_model: str
    edid_serial: str
    generation: int = 0       # bumps once per change of mode, on/off or timing model reset
    residual_rms_ns: int = 0  # the refresh model's residuals over residual_samples vblanks
    residual_p99_ns: int = 0
    residual_samples: int = 0  # 0: not measured
    min_interval_ns: int = 0  # variable refresh range: shortest interval (1 / max rate); 0 when not capable
    max_interval_ns: int = 0  # longest (1 / min rate); 0 when not capable or unknown

    @property
    def primary(self):
        return bool(self.flags & _lib.DISPLAY_FLAG_PRIMARY)

    @property
    def interrupt_timestamps(self):
        """The timestamps' spread says they are the interrupt's time, not scanout's."""
        return bool(self.flags & _lib.DISPLAY_FLAG_INTERRUPT_TIMESTAMPS)

    @property
    def variable(self):
        """Variable refresh (VRR) is on now."""
        return bool(self.flags & _lib.DISPLAY_FLAG_VARIABLE)

    @property
    def variable_capable(self):
        return bool(self.flags & _lib.DISPLAY_FLAG_VARIABLE_CAPABLE)

    @property
    def refresh_hz(self):
        return self.refresh_mhz / 1000


@dataclasses.dataclass(frozen=True)
class DisplayTiming:
    """A display's timing from vsyncd's timing page (Client.display_timing). CLOCK_MONOTONIC ns;
    the refresh model's line puts vblank s at anchor_ns + (s - anchor_sequence) * period_ns."""
    display_id: int
    generation: int           # the display's configuration generation
    flags: int                # display flags in bits 0-15; TIMING_ON, TIMING_CURRENT above
    last_sequence: int        # the last vblank vsyncd received, and its timestamp
    last_timestamp_ns: int
    anchor_sequence: int
    anchor_ns: int
    period_ns: float          # the model's period with its fraction; 0: not measured
    refresh_mhz: int
    min_interval_ns: int      # variable refresh's bounds; 0 on a fixed grid
    max_interval_ns: int
    updated_ns: int           # when vsyncd last wrote the record
    next_sequence: int        # the first vblank the model puts after after_ns (0 without a period)
    next_ns: int

    @property
    def on(self):
        return bool(self.flags & _lib.TIMING_ON)

    @property
    def current(self):
        """Vblank events are on and one has come since: last_* is at most a frame old."""
        return bool(self.flags & _lib.TIMING_CURRENT)

    @classmethod
    def _from(cls, t):
        return cls(t.display_id, t.generation, t.flags, t.last_sequence, t.last_timestamp_ns, t.anchor_sequence,
                   t.anchor_ns, t.period, t.refresh_mhz, t.min_interval_ns, t.max_interval_ns, t.updated_ns,
                   t.next_sequence, t.next_ns)


def _text(raw):
    return raw.decode("utf-8", errors="replace")
