//! Late frames' reasons: the app ends each frame with [`Link::frame_done`], and libvsync judges
//! it by the rules of the Swift DisplayLink's FrameMonitor (Android FrameTimeline's reasons).
use crate::{sys, Error, Frame, Link};
use std::ffi::CStr;
use std::os::raw::c_int;

/// Why a frame was late (or that it was not). The values are libvsync's `enum vsync_frame_reason`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum FrameReason {
    /// Presented within 2 ms of its target.
    OnTime = sys::VSYNC_REASON_ON_TIME,
    /// The app's work took longer than the time it had.
    AppDeadlineMissed = sys::VSYNC_REASON_APP_DEADLINE_MISSED,
    /// vsyncd sent the tick late.
    DaemonLate = sys::VSYNC_REASON_DAEMON_LATE,
    /// Sent on time, read late: the app's thread did not run.
    DeliveryLate = sys::VSYNC_REASON_DELIVERY_LATE,
    /// Finished in time, shown a whole number of vsyncs off.
    PresentScheduling = sys::VSYNC_REASON_PRESENT_SCHEDULING,
    /// The vblank did not come when the refresh model said.
    PredictionError = sys::VSYNC_REASON_PREDICTION_ERROR,
    /// Variable refresh: the display waited past the earliest vblank.
    VariableRefresh = sys::VSYNC_REASON_VARIABLE_REFRESH,
    /// The display was off.
    DisplayOff = sys::VSYNC_REASON_DISPLAY_OFF,
    /// A predicted frame while the display was off.
    PredictedWhileOff = sys::VSYNC_REASON_PREDICTED_WHILE_OFF,
    /// The display's mode changed since the last frame.
    ModeChange = sys::VSYNC_REASON_MODE_CHANGE,
    /// The facts do not say.
    Unknown = sys::VSYNC_REASON_UNKNOWN,
}

impl FrameReason {
    /// Every reason, in value order.
    pub const ALL: [FrameReason; sys::VSYNC_REASON_COUNT] = [
        FrameReason::OnTime,
        FrameReason::AppDeadlineMissed,
        FrameReason::DaemonLate,
        FrameReason::DeliveryLate,
        FrameReason::PresentScheduling,
        FrameReason::PredictionError,
        FrameReason::VariableRefresh,
        FrameReason::DisplayOff,
        FrameReason::PredictedWhileOff,
        FrameReason::ModeChange,
        FrameReason::Unknown,
    ];

    /// The reason a value names; a newer library's reason this crate does not know is `Unknown`.
    pub fn from_raw(value: c_int) -> FrameReason {
        FrameReason::ALL.get(value as usize).copied().unwrap_or(FrameReason::Unknown)
    }

    /// The name `vsync-probe follow --json` prints ("appDeadlineMissed").
    pub fn name(self) -> &'static str {
        let p = unsafe { sys::vsync_frame_reason_name(self as c_int) };
        if p.is_null() {
            return "unknown";
        }
        unsafe { CStr::from_ptr(p) }.to_str().unwrap_or("unknown")
    }

    /// Anything but on time.
    pub fn is_late(self) -> bool {
        self != FrameReason::OnTime
    }
}

/// A link's frames judged since it was created, per reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FrameCounts {
    pub frames: u64,
    /// Of those, the ones not on time.
    pub late: u64,
    by_reason: [u64; sys::VSYNC_REASON_COUNT],
}

impl FrameCounts {
    /// Frames judged with `reason`.
    pub fn count(&self, reason: FrameReason) -> u64 {
        self.by_reason[reason as usize]
    }
}

impl Link<'_> {
    /// Ends `frame` (one this link's callback got): its work ended at `work_end_ns` (CLOCK_MONOTONIC,
    /// [`crate::now_ns`]; 0: now). Returns its reason. Once per frame, in order, from the callback's
    /// thread after the callback returned (keep the frame, it is `Copy`).
    pub fn frame_done(&self, frame: &Frame, work_end_ns: u64) -> Result<FrameReason, Error> {
        let rc = unsafe { sys::vsync_link_frame_done(self.raw.as_ptr(), frame.raw(), work_end_ns) };
        self.check(rc)?;
        Ok(FrameReason::from_raw(rc))
    }

    /// The link's counts since it was created; subtract two readings for a window's.
    pub fn frame_counts(&self) -> Result<FrameCounts, Error> {
        let mut raw = sys::vsync_frame_counts {
            struct_size: std::mem::size_of::<sys::vsync_frame_counts>() as u32,
            ..Default::default()
        };
        self.check(unsafe { sys::vsync_link_get_frame_counts(self.raw.as_ptr(), &mut raw) })?;
        let mut by_reason = [0u64; sys::VSYNC_REASON_COUNT];
        by_reason.copy_from_slice(&raw.by_reason[..sys::VSYNC_REASON_COUNT]);
        Ok(FrameCounts { frames: raw.frames, late: raw.late, by_reason })
    }
}
