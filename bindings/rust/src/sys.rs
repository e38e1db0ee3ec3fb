//! The raw C API of `vsync/vsync.h`, declared by hand (no bindgen: no dependencies).
//! `tests/abi.rs` compiles a C program against the header and checks every struct's size and
//! offsets and every constant here against it.
#![allow(non_camel_case_types)]

use std::os::raw::{c_char, c_int, c_void};

pub const VSYNC_VERSION_MAJOR: u32 = 0;
pub const VSYNC_VERSION_MINOR: u32 = 3;
pub const VSYNC_VERSION_MICRO: u32 = 0;
pub const VSYNC_VERSION: u32 = (VSYNC_VERSION_MAJOR << 16) | (VSYNC_VERSION_MINOR << 8) | VSYNC_VERSION_MICRO;

// Linux errno values, returned negated.
pub const VSYNC_ENODAEMON: c_int = 111;
pub const VSYNC_EACCES: c_int = 13;
pub const VSYNC_ECONNECT: c_int = 5;
pub const VSYNC_ECONNLOST: c_int = 104;
pub const VSYNC_EREFUSED: c_int = 103;
pub const VSYNC_ENODISPLAY: c_int = 19;
pub const VSYNC_EDISPLAYGONE: c_int = 6;
pub const VSYNC_EREQUEST: c_int = 121;
pub const VSYNC_EPROTO: c_int = 71;
pub const VSYNC_EINVAL: c_int = 22;
pub const VSYNC_ENOMEM: c_int = 12;
pub const VSYNC_ETIMEDOUT: c_int = 110;
pub const VSYNC_ENOTCONN: c_int = 107;
pub const VSYNC_EBUSY: c_int = 16;
pub const VSYNC_ENOPAGE: c_int = 61;
pub const VSYNC_ENOTONPAGE: c_int = 2;
pub const VSYNC_EAGAIN: c_int = 11;

pub const VSYNC_FRAME_HARDWARE: u32 = 1;
pub const VSYNC_FRAME_PREDICTED: u32 = 2;
pub const VSYNC_FRAME_SYNTHETIC: u32 = 4;
pub const VSYNC_FRAME_VARIABLE: u32 = 8;
pub const VSYNC_FRAME_MODEL_TIMED: u32 = 16;

pub const VSYNC_DISPLAY_MODE_CHANGED: u32 = 1;
pub const VSYNC_DISPLAY_OFF: u32 = 2;
pub const VSYNC_DISPLAY_ON: u32 = 3;
pub const VSYNC_DISPLAY_VARIABLE_REFRESH_CHANGED: u32 = 6;
pub const VSYNC_DISPLAY_WAITING: u32 = 256;

pub const VSYNC_DISPLAY_STATE_OFF: u32 = 0;
pub const VSYNC_DISPLAY_STATE_ON: u32 = 1;
pub const VSYNC_DISPLAY_FLAG_HARDWARE_CLOCK: u32 = 1;
pub const VSYNC_DISPLAY_FLAG_SYNTHETIC: u32 = 2;
pub const VSYNC_DISPLAY_FLAG_PRIMARY: u32 = 4;
pub const VSYNC_DISPLAY_FLAG_INTERRUPT_TIMESTAMPS: u32 = 8;
pub const VSYNC_DISPLAY_FLAG_VARIABLE: u32 = 16;
pub const VSYNC_DISPLAY_FLAG_VARIABLE_CAPABLE: u32 = 32;

pub const VSYNC_TIMING_ON: u32 = 0x10000;
pub const VSYNC_TIMING_CURRENT: u32 = 0x20000;

pub const VSYNC_MAX_DISPLAYS: usize = 42;

// enum vsync_frame_reason
pub const VSYNC_REASON_ON_TIME: c_int = 0;
pub const VSYNC_REASON_APP_DEADLINE_MISSED: c_int = 1;
pub const VSYNC_REASON_DAEMON_LATE: c_int = 2;
pub const VSYNC_REASON_DELIVERY_LATE: c_int = 3;
pub const VSYNC_REASON_PRESENT_SCHEDULING: c_int = 4;
pub const VSYNC_REASON_PREDICTION_ERROR: c_int = 5;
pub const VSYNC_REASON_VARIABLE_REFRESH: c_int = 6;
pub const VSYNC_REASON_DISPLAY_OFF: c_int = 7;
pub const VSYNC_REASON_PREDICTED_WHILE_OFF: c_int = 8;
pub const VSYNC_REASON_MODE_CHANGE: c_int = 9;
pub const VSYNC_REASON_UNKNOWN: c_int = 10;
pub const VSYNC_REASON_COUNT: usize = 11;

pub const VSYNC_JANK_PRESENT_THRESHOLD_NS: u64 = 2_000_000;
pub const VSYNC_JANK_DEADLINE_THRESHOLD_NS: u64 = 0;
pub const VSYNC_JANK_START_THRESHOLD_NS: u64 = 2_000_000;

#[repr(C)]
pub struct vsync_client {
    _opaque: [u8; 0],
}

#[repr(C)]
pub struct vsync_link {
    _opaque: [u8; 0],
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct vsync_frame_timeline {
    pub sequence: u64,
    pub presentation_ns: u64,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct vsync_frame {
    pub struct_size: u32,
    pub display_id: u32,
    pub sequence: u64,
    pub timestamp_ns: u64,
    pub target_timestamp_ns: u64,
    pub duration_ns: u64,
    pub skipped: u32,
    pub flags: u32,
    pub interval_ns: u64,
    pub received_ns: u64,
    pub divisor: u32,
    pub reserved: u32,
    pub target_sequence: u64,
    pub timeline_count: u32,
    pub reserved2: u32,
    pub timelines: [vsync_frame_timeline; 4],
    pub generation: u32,
    pub reserved3: u32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct vsync_display_event {
    pub struct_size: u32,
    pub kind: u32,
    pub display_id: u32,
    pub reserved: u32,
    pub refresh_mhz: u64,
    pub period_ns: u64,
    pub generation: u32,
    pub reserved2: u32,
    pub flags: u32,
    pub reserved3: u32,
    pub min_interval_ns: u64,
    pub max_interval_ns: u64,
    pub monotonic_ns: u64,
    pub realtime_ns: u64,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct vsync_display {
    pub struct_size: u32,
    pub display_id: u32,
    pub crtc_id: u32,
    pub connector_id: u32,
    pub state: u32,
    pub flags: u32,
    pub refresh_mhz: u64,
    pub period_ns: u64,
    pub width: u32,
    pub height: u32,
    pub name: [c_char; 40],
    pub device_path: [c_char; 64],
    pub bus_path: [c_char; 128],
    pub edid_make: [c_char; 16],
    pub edid_model: [c_char; 32],
    pub edid_serial: [c_char; 32],
    pub generation: u32,
    pub residual_rms_ns: u32,
    pub residual_p99_ns: u32,
    pub residual_samples: u32,
    pub min_interval_ns: u64,
    pub max_interval_ns: u64,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct vsync_display_timing {
    pub struct_size: u32,
    pub display_id: u32,
    pub generation: u32,
    pub flags: u32,
    pub last_sequence: u64,
    pub last_timestamp_ns: u64,
    pub anchor_sequence: u64,
    pub anchor_ns: u64,
    pub period_ns: u64,
    pub period_frac: u32,
    pub reserved: u32,
    pub period: f64,
    pub refresh_mhz: u64,
    pub min_interval_ns: u64,
    pub max_interval_ns: u64,
    pub updated_ns: u64,
    pub next_sequence: u64,
    pub next_ns: u64,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct vsync_frame_counts {
    pub struct_size: u32,
    pub reason_count: u32,
    pub frames: u64,
    pub late: u64,
    pub by_reason: [u64; 16],
}

pub type vsync_frame_fn = Option<unsafe extern "C" fn(*mut vsync_link, *const vsync_frame, *mut c_void)>;
pub type vsync_display_fn = Option<unsafe extern "C" fn(*mut vsync_link, *const vsync_display_event, *mut c_void)>;
pub type vsync_error_fn = Option<unsafe extern "C" fn(*mut vsync_link, c_int, *const c_char, *mut c_void)>;

extern "C" {
    pub fn vsync_version() -> u32;
    pub fn vsync_client_connect(socket_path: *const c_char, out: *mut *mut vsync_client) -> c_int;
    pub fn vsync_client_get_fd(client: *mut vsync_client) -> c_int;
    pub fn vsync_client_dispatch(client: *mut vsync_client, timeout_ms: c_int) -> c_int;
    pub fn vsync_client_get_displays(
        client: *mut vsync_client,
        displays: *mut vsync_display,
        capacity: usize,
        element_size: usize,
    ) -> c_int;
    pub fn vsync_client_last_error(client: *const vsync_client) -> *const c_char;
    pub fn vsync_client_destroy(client: *mut vsync_client);
    pub fn vsync_link_create(
        client: *mut vsync_client,
        display: *const c_char,
        func: vsync_frame_fn,
        user: *mut c_void,
        out: *mut *mut vsync_link,
    ) -> c_int;
    pub fn vsync_link_set_rate(link: *mut vsync_link, min_fps: f64, max_fps: f64, preferred_fps: f64) -> c_int;
    pub fn vsync_link_set_work_duration(link: *mut vsync_link, ns: u64) -> c_int;
    pub fn vsync_link_set_predict_while_off(link: *mut vsync_link, on: bool) -> c_int;
    pub fn vsync_link_set_hardware_ticks(link: *mut vsync_link, on: bool) -> c_int;
    pub fn vsync_link_set_paused(link: *mut vsync_link, paused: bool) -> c_int;
    pub fn vsync_link_set_display_callback(link: *mut vsync_link, func: vsync_display_fn) -> c_int;
    pub fn vsync_link_set_error_callback(link: *mut vsync_link, func: vsync_error_fn) -> c_int;
    pub fn vsync_link_get_refresh(link: *mut vsync_link, refresh_mhz: *mut u64, period_ns: *mut u64) -> c_int;
    pub fn vsync_link_get_max_fps(link: *mut vsync_link) -> c_int;
    pub fn vsync_link_set_page_only(link: *mut vsync_link, page_only: bool) -> c_int;
    pub fn vsync_display_timing(
        client: *mut vsync_client,
        display_id: u32,
        after_ns: u64,
        out: *mut vsync_display_timing,
    ) -> c_int;
    pub fn vsync_link_destroy(link: *mut vsync_link);
    pub fn vsync_link_frame_done(link: *mut vsync_link, frame: *const vsync_frame, work_end_ns: u64) -> c_int;
    pub fn vsync_link_get_frame_counts(link: *mut vsync_link, out: *mut vsync_frame_counts) -> c_int;
    pub fn vsync_frame_reason_name(reason: c_int) -> *const c_char;
    pub fn vsync_strerror(code: c_int) -> *const c_char;
    pub fn vsync_now_ns() -> u64;
}
