use crate::sys;
use std::os::raw::c_char;

/// One upcoming presentation candidate at the link's rate.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Timeline {
    /// A vblank the frame could be shown at.
    pub sequence: u64,
    /// Its predicted time (CLOCK_MONOTONIC ns).
    pub presentation_ns: u64,
}

/// One frame: the newest tick of a link in one dispatch. Times are CLOCK_MONOTONIC ns.
#[derive(Debug, Clone, Copy, Default)]
pub struct Frame {
    pub display_id: u32,
    /// The newest vblank's 64-bit sequence.
    pub sequence: u64,
    /// When that vblank happened (CADisplayLink `timestamp`).
    pub timestamp_ns: u64,
    /// The predicted time of vblank `target_sequence`: the frame's deadline (`targetTimestamp`).
    pub target_timestamp_ns: u64,
    /// The vblank the frame is for.
    pub target_sequence: u64,
    /// The display's frame interval (CADisplayLink `duration`).
    pub duration_ns: u64,
    /// `divisor × duration_ns`: the frame time at the link's rate.
    pub interval_ns: u64,
    /// Frames at the link's rate not delivered since the last one.
    pub skipped: u32,
    /// The link gets every `divisor`-th vblank.
    pub divisor: u32,
    /// `sys::VSYNC_FRAME_*`: hardware, predicted, synthetic.
    pub flags: u32,
    /// When the library read the tick.
    pub received_ns: u64,
    /// The display's configuration generation: differs from the last frame's after any change
    /// of mode, on/off or timing model reset (0 from a vsyncd before protocol 4).
    pub generation: u32,
    timeline_count: usize,
    timelines: [Timeline; 4],
    /// The library's frame, for `Link::frame_done`.
    raw: sys::vsync_frame,
}

impl Frame {
    pub(crate) fn from_raw(f: &sys::vsync_frame) -> Frame {
        let mut timelines = [Timeline::default(); 4];
        for (t, raw) in timelines.iter_mut().zip(f.timelines.iter()) {
            *t = Timeline { sequence: raw.sequence, presentation_ns: raw.presentation_ns };
        }
        Frame {
            display_id: f.display_id,
            sequence: f.sequence,
            timestamp_ns: f.timestamp_ns,
            target_timestamp_ns: f.target_timestamp_ns,
            target_sequence: f.target_sequence,
            duration_ns: f.duration_ns,
            interval_ns: f.interval_ns,
            skipped: f.skipped,
            divisor: f.divisor,
            flags: f.flags,
            received_ns: f.received_ns,
            generation: f.generation,
            timeline_count: (f.timeline_count as usize).min(4),
            timelines,
            raw: *f,
        }
    }

    pub(crate) fn raw(&self) -> &sys::vsync_frame {
        &self.raw
    }

    /// The target, then up to three later vblanks at the link's rate.
    pub fn timelines(&self) -> &[Timeline] {
        &self.timelines[..self.timeline_count]
    }

    /// From vsyncd's timer source: no display behind it.
    pub fn is_synthetic(&self) -> bool {
        self.flags & sys::VSYNC_FRAME_SYNTHETIC != 0
    }

    /// A prediction (the display is off), not a vblank that happened.
    pub fn is_predicted(&self) -> bool {
        self.flags & sys::VSYNC_FRAME_PREDICTED != 0
    }

    /// Variable refresh (VRR) is on (protocol 5): `target_timestamp_ns` and the timelines are
    /// the earliest each vblank can come, and `duration_ns` is the shortest interval.
    pub fn is_variable(&self) -> bool {
        self.flags & sys::VSYNC_FRAME_VARIABLE != 0
    }

    /// The display is on but vsyncd samples its vblanks sparsely (protocol 6): `timestamp_ns`
    /// is the refresh model's prediction of the vblank `sequence` counts. Never with
    /// [`Link::set_hardware_ticks`](crate::Link::set_hardware_ticks).
    pub fn is_model_timed(&self) -> bool {
        self.flags & sys::VSYNC_FRAME_MODEL_TIMED != 0
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DisplayEventKind {
    /// A new refresh: re-read the rate.
    ModeChanged,
    /// Frames stop until it is on again.
    Off,
    On,
    /// No such display yet: frames start when it appears.
    Waiting,
    /// Variable refresh turned on or off (`DisplayEvent::is_variable` says which).
    VariableRefreshChanged,
    /// A kind a newer library reports.
    Other(u32),
}

/// A change to a link's display.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DisplayEvent {
    pub kind: DisplayEventKind,
    pub display_id: u32,
    /// Exact refresh in millihertz; 0 while off.
    pub refresh_mhz: u64,
    pub period_ns: u64,
    /// The display's configuration generation after the change.
    pub generation: u32,
    /// `sys::VSYNC_DISPLAY_FLAG_*` after the change (protocol 5; 0 from older ones).
    pub flags: u32,
    /// The variable refresh range as intervals, ns (0 when the monitor cannot vary its refresh).
    pub min_interval_ns: u64,
    pub max_interval_ns: u64,
    /// CLOCK_MONOTONIC and CLOCK_REALTIME read together when vsyncd built the event (0: none).
    pub monotonic_ns: u64,
    pub realtime_ns: u64,
}

impl DisplayEvent {
    pub(crate) fn from_raw(e: &sys::vsync_display_event) -> DisplayEvent {
        let kind = match e.kind {
            sys::VSYNC_DISPLAY_MODE_CHANGED => DisplayEventKind::ModeChanged,
            sys::VSYNC_DISPLAY_OFF => DisplayEventKind::Off,
            sys::VSYNC_DISPLAY_ON => DisplayEventKind::On,
            sys::VSYNC_DISPLAY_WAITING => DisplayEventKind::Waiting,
            sys::VSYNC_DISPLAY_VARIABLE_REFRESH_CHANGED => DisplayEventKind::VariableRefreshChanged,
            other => DisplayEventKind::Other(other),
        };
        // Fields a library older than protocol 5 did not fill read as 0.
        let new = e.struct_size as usize >= std::mem::size_of::<sys::vsync_display_event>();
        DisplayEvent {
            kind,
            display_id: e.display_id,
            refresh_mhz: e.refresh_mhz,
            period_ns: e.period_ns,
            generation: e.generation,
            flags: if new { e.flags } else { 0 },
            min_interval_ns: if new { e.min_interval_ns } else { 0 },
            max_interval_ns: if new { e.max_interval_ns } else { 0 },
            monotonic_ns: if new { e.monotonic_ns } else { 0 },
            realtime_ns: if new { e.realtime_ns } else { 0 },
        }
    }

    /// Variable refresh is on after the change.
    pub fn is_variable(&self) -> bool {
        self.flags & sys::VSYNC_DISPLAY_FLAG_VARIABLE != 0
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DisplayState {
    Off,
    On,
}

/// One display as vsyncd lists it. Identity strings are "" when vsyncd does not know them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Display {
    /// vsyncd's id: the selector `"display:ID"`.
    pub id: u32,
    /// The connector: "HDMI-A-1", "Virtual-1"; "timer" for the timer source.
    pub name: String,
    pub state: DisplayState,
    /// Exact refresh in millihertz (59940 = 59.94 Hz); 0 if off.
    pub refresh_mhz: u64,
    pub period_ns: u64,
    pub width: u32,
    pub height: u32,
    pub crtc_id: u32,
    pub connector_id: u32,
    /// `sys::VSYNC_DISPLAY_FLAG_*`.
    pub flags: u32,
    /// The card: "/dev/dri/card0".
    pub device_path: String,
    /// The card's stable bus path ("pci-0000:00:02.0").
    pub bus_path: String,
    pub edid_make: String,
    pub edid_model: String,
    pub edid_serial: String,
    /// Configuration generation: bumps once per change of mode, on/off or model reset.
    pub generation: u32,
    /// The refresh model's residual RMS and 99th percentile over `residual_samples` vblanks, ns
    /// (0 samples: not measured).
    pub residual_rms_ns: u32,
    pub residual_p99_ns: u32,
    pub residual_samples: u32,
    /// The variable refresh range as intervals, ns: the shortest (1 / the EDID range's maximum
    /// rate) and the longest (1 / its minimum; 0 unknown); both 0 when the monitor cannot.
    pub min_interval_ns: u64,
    pub max_interval_ns: u64,
}

fn text(chars: &[c_char]) -> String {
    let bytes: Vec<u8> = chars.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

impl Display {
    pub(crate) fn from_raw(d: &sys::vsync_display) -> Display {
        Display {
            id: d.display_id,
            name: text(&d.name),
            state: if d.state == sys::VSYNC_DISPLAY_STATE_ON { DisplayState::On } else { DisplayState::Off },
            refresh_mhz: d.refresh_mhz,
            period_ns: d.period_ns,
            width: d.width,
            height: d.height,
            crtc_id: d.crtc_id,
            connector_id: d.connector_id,
            flags: d.flags,
            device_path: text(&d.device_path),
            bus_path: text(&d.bus_path),
            edid_make: text(&d.edid_make),
            edid_model: text(&d.edid_model),
            edid_serial: text(&d.edid_serial),
            generation: d.generation,
            residual_rms_ns: d.residual_rms_ns,
            residual_p99_ns: d.residual_p99_ns,
            residual_samples: d.residual_samples,
            min_interval_ns: d.min_interval_ns,
            max_interval_ns: d.max_interval_ns,
        }
    }

    /// Variable refresh (VRR) is on now.
    pub fn is_variable(&self) -> bool {
        self.flags & sys::VSYNC_DISPLAY_FLAG_VARIABLE != 0
    }

    /// The monitor can vary its refresh (the connector's `vrr_capable`).
    pub fn is_variable_capable(&self) -> bool {
        self.flags & sys::VSYNC_DISPLAY_FLAG_VARIABLE_CAPABLE != 0
    }

    /// The timestamps' spread says they are the interrupt's time, not scanout's.
    pub fn has_interrupt_timestamps(&self) -> bool {
        self.flags & sys::VSYNC_DISPLAY_FLAG_INTERRUPT_TIMESTAMPS != 0
    }

    /// What the selector `None` / "primary" picks.
    pub fn is_primary(&self) -> bool {
        self.flags & sys::VSYNC_DISPLAY_FLAG_PRIMARY != 0
    }
}

/// A display's timing from vsyncd's timing page ([`crate::Client::display_timing`]). Times are
/// CLOCK_MONOTONIC ns; the refresh model's line puts vblank s at
/// `anchor_ns + (s - anchor_sequence) * period_ns`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DisplayTiming {
    pub display_id: u32,
    /// The display's configuration generation (as in frames).
    pub generation: u32,
    /// Display flags in bits 0-15; `VSYNC_TIMING_ON`, `VSYNC_TIMING_CURRENT` above.
    pub flags: u32,
    /// The last vblank vsyncd received, and its kernel timestamp.
    pub last_sequence: u64,
    pub last_timestamp_ns: u64,
    pub anchor_sequence: u64,
    pub anchor_ns: u64,
    /// The model's period: whole ns plus `period_frac / 2^32`; 0 when not measured.
    pub period_ns: u64,
    pub period_frac: u32,
    /// The same period as a float (ns).
    pub period: f64,
    pub refresh_mhz: u64,
    /// Variable refresh's interval bounds; 0 on a fixed grid.
    pub min_interval_ns: u64,
    pub max_interval_ns: u64,
    /// When vsyncd last wrote the record.
    pub updated_ns: u64,
    /// The first vblank the model puts strictly after the call's `after_ns`, and its time.
    pub next_sequence: u64,
    pub next_ns: u64,
}

impl DisplayTiming {
    pub(crate) fn from_raw(t: &sys::vsync_display_timing) -> DisplayTiming {
        DisplayTiming {
            display_id: t.display_id,
            generation: t.generation,
            flags: t.flags,
            last_sequence: t.last_sequence,
            last_timestamp_ns: t.last_timestamp_ns,
            anchor_sequence: t.anchor_sequence,
            anchor_ns: t.anchor_ns,
            period_ns: t.period_ns,
            period_frac: t.period_frac,
            period: t.period,
            refresh_mhz: t.refresh_mhz,
            min_interval_ns: t.min_interval_ns,
            max_interval_ns: t.max_interval_ns,
            updated_ns: t.updated_ns,
            next_sequence: t.next_sequence,
            next_ns: t.next_ns,
        }
    }

    /// The display is lit.
    pub fn is_on(&self) -> bool {
        self.flags & sys::VSYNC_TIMING_ON != 0
    }

    /// Vblank events are on and one has come since: `last_*` is at most a frame old.
    pub fn is_current(&self) -> bool {
        self.flags & sys::VSYNC_TIMING_CURRENT != 0
    }
}
