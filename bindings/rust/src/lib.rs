//! Frame ticks from vsyncd, the daemon that turns a display's real vertical blanks into ticks:
//! CADisplayLink for Linux, in safe Rust over libvsync (`libvsync.so.1`).
//!
//! A [`Client`] is one connection to vsyncd. It owns no thread: put its fd (it is [`AsFd`] and
//! [`AsRawFd`]) into your loop (mio, tokio's `AsyncFd`, calloop, `poll`) and call
//! [`Client::dispatch`] when it is readable, or just call `dispatch(None)` in a loop. Each
//! [`Link`] follows one display at its own rate and runs its closure once per frame, inside
//! `dispatch`, on the calling thread.
//!
//! ```no_run
//! let client = vsync::Client::connect(None)?;            // $VSYNCD_SOCKET or /run/vsyncd/vsyncd.sock
//! let link = client.link(None, |frame: &vsync::Frame| {
//!     println!("vblank {} at {} ns, next at {} ns", frame.sequence, frame.timestamp_ns, frame.target_timestamp_ns);
//! })?;
//! link.set_rate(0.0, 0.0, 30.0)?;                        // 30 fps: 60, 30, 20 ... on 60 Hz
//! loop {
//!     client.dispatch(None)?;
//! }
//! # Ok::<(), vsync::Error>(())
//! ```
//!
//! Safety by construction: a `Link<'c>` borrows its `Client`, so it cannot outlive it (this does
//! not compile):
//!
//! ```compile_fail,E0505
//! let client = vsync::Client::connect(None)?;
//! let link = client.link(None, |_: &vsync::Frame| {})?;
//! drop(client); // error[E0505]: cannot move out of `client` because it is borrowed
//! link.set_paused(true)?;
//! # Ok::<(), vsync::Error>(())
//! ```
//!
//! A panic in
//! a closure is caught at the C boundary and resumed from `dispatch` once the library returned.
//! `Client` and `Link` are neither `Send` nor `Sync`: one thread, as libvsync asks.
//!
//! Linking: `build.rs` finds libvsync in `$LIBVSYNC_DIR`, else in this checkout's Swift build,
//! else on the system (the `libvsync-dev` package).

pub mod sys;
mod error;
mod reason;
mod types;

pub use error::Error;
pub use reason::{FrameCounts, FrameReason};
pub use types::{Display, DisplayEvent, DisplayEventKind, DisplayState, DisplayTiming, Frame, Timeline};

use std::any::Any;
use std::cell::RefCell;
use std::ffi::{CStr, CString};
use std::marker::PhantomData;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::os::raw::{c_char, c_int, c_void};
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::path::Path;
use std::ptr::{self, NonNull};
use std::rc::Rc;
use std::time::Duration;

/// The library's version at run time: (major, minor, micro).
pub fn library_version() -> (u32, u32, u32) {
    let v = unsafe { sys::vsync_version() };
    (v >> 16, (v >> 8) & 0xff, v & 0xff)
}

/// CLOCK_MONOTONIC now, in ns: the clock of every timestamp.
pub fn now_ns() -> u64 {
    unsafe { sys::vsync_now_ns() }
}

/// A panic caught in a callback, resumed by `dispatch` after the library returned.
type PanicSlot = Rc<RefCell<Option<Box<dyn Any + Send>>>>;

/// One connection to vsyncd. Dropping it closes the connection.
pub struct Client {
    raw: NonNull<sys::vsync_client>,
    panic: PanicSlot,
    // Not Send, not Sync: libvsync's client is used by one thread at a time.
    _not_send: PhantomData<*mut ()>,
}

impl Client {
    /// Connects to vsyncd and does the handshake (waiting up to 2 s). `None`: `$VSYNCD_SOCKET`,
    /// else `/run/vsyncd/vsyncd.sock`.
    pub fn connect(socket: Option<&Path>) -> Result<Client, Error> {
        let path = match socket {
            Some(p) => Some(
                CString::new(p.as_os_str().as_encoded_bytes())
                    .map_err(|_| Error::InvalidArgument("the socket path holds a NUL byte".into()))?,
            ),
            None => None,
        };
        let mut raw = ptr::null_mut();
        let rc = unsafe { sys::vsync_client_connect(path.as_ref().map_or(ptr::null(), |p| p.as_ptr()), &mut raw) };
        if rc < 0 {
            // This thread's line for the failed connect.
            return Err(Error::from_code(rc, unsafe { line(sys::vsync_client_last_error(ptr::null())) }));
        }
        let raw = NonNull::new(raw).ok_or_else(|| Error::from_code(-sys::VSYNC_ENOMEM, String::new()))?;
        Ok(Client { raw, panic: Rc::new(RefCell::new(None)), _not_send: PhantomData })
    }

    /// Waits up to `timeout` (`None`: until something happens; a signal also ends the wait),
    /// reads what is pending and runs the links' closures. Returns the frames delivered. A panic
    /// in a closure is resumed here.
    pub fn dispatch(&self, timeout: Option<Duration>) -> Result<u32, Error> {
        let ms = match timeout {
            None => -1,
            Some(d) => d.as_millis().min(i32::MAX as u128) as c_int,
        };
        let rc = unsafe { sys::vsync_client_dispatch(self.raw.as_ptr(), ms) };
        if let Some(payload) = self.panic.borrow_mut().take() {
            resume_unwind(payload);
        }
        if rc < 0 {
            return Err(self.error(rc));
        }
        Ok(rc as u32)
    }

    /// The displays vsyncd has, asked for now (waits up to 2 s for the answer).
    pub fn displays(&self) -> Result<Vec<Display>, Error> {
        let mut list: Vec<sys::vsync_display> = Vec::with_capacity(sys::VSYNC_MAX_DISPLAYS);
        let size = std::mem::size_of::<sys::vsync_display>();
        let rc = unsafe {
            sys::vsync_client_get_displays(self.raw.as_ptr(), list.as_mut_ptr(), sys::VSYNC_MAX_DISPLAYS, size)
        };
        if rc < 0 {
            return Err(self.error(rc));
        }
        let filled = (rc as usize).min(sys::VSYNC_MAX_DISPLAYS);
        // The library wrote `filled` whole records.
        unsafe { list.set_len(filled) };
        Ok(list.iter().map(Display::from_raw).collect())
    }

    /// The display's last vblank and refresh model from vsyncd's timing page (protocol 5), read
    /// with no syscall, and the first vblank the model puts after `after_ns` (0: now) in
    /// `next_sequence`/`next_ns`. [`Error::NoTimingPage`] before a protocol 5 connection,
    /// [`Error::NotOnTimingPage`] for a display the page does not hold, [`Error::TimingBusy`]
    /// when its record stayed locked. A link with [`Link::set_page_only`] keeps the record current.
    pub fn display_timing(&self, display_id: u32, after_ns: u64) -> Result<DisplayTiming, Error> {
        let mut raw = sys::vsync_display_timing::default();
        let rc = unsafe { sys::vsync_display_timing(self.raw.as_ptr(), display_id, after_ns, &mut raw) };
        if rc < 0 {
            // The read records no error line (any thread may call it): the code's own line.
            return Err(Error::from_code(rc, String::new()));
        }
        Ok(DisplayTiming::from_raw(&raw))
    }

    /// A link to one display: `None` or `"primary"`, a connector name (`"HDMI-A-1"`),
    /// `"crtc:ID"` or `"display:ID"`. `on_frame` runs once per frame, at the display's full rate
    /// until [`Link::set_rate`] says otherwise (settings made before the next dispatch already
    /// apply to the first frame).
    pub fn link<'c, F>(&'c self, display: Option<&str>, on_frame: F) -> Result<Link<'c>, Error>
    where
        F: FnMut(&Frame) + 'c,
    {
        let selector = match display {
            Some(d) => Some(CString::new(d).map_err(|_| Error::InvalidArgument("the display name holds a NUL byte".into()))?),
            None => None,
        };
        let callbacks: Box<Callbacks<'c>> = Box::new(Callbacks {
            frame: RefCell::new(Box::new(on_frame)),
            display: RefCell::new(None),
            error: RefCell::new(None),
            panic: self.panic.clone(),
        });
        let user = Box::into_raw(callbacks);
        let mut raw = ptr::null_mut();
        let rc = unsafe {
            sys::vsync_link_create(
                self.raw.as_ptr(),
                selector.as_ref().map_or(ptr::null(), |s| s.as_ptr()),
                Some(frame_trampoline),
                user as *mut c_void,
                &mut raw,
            )
        };
        match NonNull::new(raw) {
            Some(raw) if rc == 0 => Ok(Link { raw, callbacks: user, client: self }),
            _ => {
                drop(unsafe { Box::from_raw(user) });
                Err(self.error(if rc < 0 { rc } else { -sys::VSYNC_ENOMEM }))
            }
        }
    }

    /// The last error's whole line, or "".
    pub fn last_error(&self) -> String {
        unsafe { line(sys::vsync_client_last_error(self.raw.as_ptr())) }
    }

    fn error(&self, rc: c_int) -> Error {
        Error::from_code(rc, self.last_error())
    }
}

impl AsRawFd for Client {
    /// The fd to poll for reading; the same for the client's life, across reconnects.
    fn as_raw_fd(&self) -> RawFd {
        unsafe { sys::vsync_client_get_fd(self.raw.as_ptr()) }
    }
}

impl AsFd for Client {
    fn as_fd(&self) -> BorrowedFd<'_> {
        // The client owns the fd and keeps it open until it is dropped.
        unsafe { BorrowedFd::borrow_raw(self.as_raw_fd()) }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        unsafe { sys::vsync_client_destroy(self.raw.as_ptr()) }
    }
}

/// A link's closures; the C library gets a pointer to this as the link's `user`.
struct Callbacks<'c> {
    frame: RefCell<Box<dyn FnMut(&Frame) + 'c>>,
    display: RefCell<Option<Box<dyn FnMut(&DisplayEvent) + 'c>>>,
    error: RefCell<Option<Box<dyn FnMut(&Error) + 'c>>>,
    panic: PanicSlot,
}

impl Callbacks<'_> {
    /// Runs `f`, catching a panic for `dispatch` to resume (unwinding into C is undefined).
    /// After a panic the rest of this dispatch's callbacks are skipped.
    fn guard(&self, f: impl FnOnce()) {
        if self.panic.borrow().is_some() {
            return;
        }
        if let Err(payload) = catch_unwind(AssertUnwindSafe(f)) {
            *self.panic.borrow_mut() = Some(payload);
        }
    }
}

unsafe extern "C" fn frame_trampoline(_: *mut sys::vsync_link, frame: *const sys::vsync_frame, user: *mut c_void) {
    let callbacks = &*(user as *const Callbacks);
    let frame = Frame::from_raw(&*frame);
    callbacks.guard(|| {
        if let Ok(mut f) = callbacks.frame.try_borrow_mut() {
            f(&frame)
        }
    });
}

unsafe extern "C" fn display_trampoline(
    _: *mut sys::vsync_link,
    event: *const sys::vsync_display_event,
    user: *mut c_void,
) {
    let callbacks = &*(user as *const Callbacks);
    let event = DisplayEvent::from_raw(&*event);
    callbacks.guard(|| {
        if let Ok(mut slot) = callbacks.display.try_borrow_mut() {
            if let Some(f) = slot.as_mut() {
                f(&event)
            }
        }
    });
}

unsafe extern "C" fn error_trampoline(_: *mut sys::vsync_link, code: c_int, message: *const c_char, user: *mut c_void) {
    let callbacks = &*(user as *const Callbacks);
    let error = Error::from_code(code, line(message));
    callbacks.guard(|| {
        if let Ok(mut slot) = callbacks.error.try_borrow_mut() {
            if let Some(f) = slot.as_mut() {
                f(&error)
            }
        }
    });
}

/// A C string from the library as an owned String ("" for NULL).
unsafe fn line(p: *const c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        CStr::from_ptr(p).to_string_lossy().into_owned()
    }
}

/// A link to one display at one rate. It borrows its [`Client`], so it cannot outlive it;
/// dropping it unsubscribes.
pub struct Link<'c> {
    raw: NonNull<sys::vsync_link>,
    callbacks: *mut Callbacks<'c>,
    client: &'c Client,
}

impl<'c> Link<'c> {
    fn check(&self, rc: c_int) -> Result<(), Error> {
        if rc < 0 {
            Err(self.client.error(rc))
        } else {
            Ok(())
        }
    }

    /// The rates the link accepts, like CAFrameRateRange: it gets refresh / d for a whole d, the
    /// one inside [min, max] nearest `preferred` (max 0: no bound; preferred 0: the highest).
    pub fn set_rate(&self, min_fps: f64, max_fps: f64, preferred_fps: f64) -> Result<(), Error> {
        self.check(unsafe { sys::vsync_link_set_rate(self.raw.as_ptr(), min_fps, max_fps, preferred_fps) })
    }

    /// Woken `lead` before each target vblank instead of just after each vblank (at most 1 s).
    pub fn set_work_duration(&self, lead: Duration) -> Result<(), Error> {
        let ns = u64::try_from(lead.as_nanos()).unwrap_or(u64::MAX);
        self.check(unsafe { sys::vsync_link_set_work_duration(self.raw.as_ptr(), ns) })
    }

    /// Predicted frames while the display is off, flagged predicted.
    pub fn set_predict_while_off(&self, on: bool) -> Result<(), Error> {
        self.check(unsafe { sys::vsync_link_set_predict_while_off(self.raw.as_ptr(), on) })
    }

    /// Every frame from a real vblank, never flagged model-timed, even under vsyncd's sparse
    /// vblank sampling (protocol 6). It keeps the display's vblank interrupt on (a laptop panel
    /// cannot self-refresh): for a frame-timing tool or a test, not for apps.
    pub fn set_hardware_ticks(&self, on: bool) -> Result<(), Error> {
        self.check(unsafe { sys::vsync_link_set_hardware_ticks(self.raw.as_ptr(), on) })
    }

    /// Page only: the link gets no frames; vsyncd keeps its display's record on the timing page
    /// current, for [`Client::display_timing`] and the app's own timer (protocol 5).
    pub fn set_page_only(&self, page_only: bool) -> Result<(), Error> {
        self.check(unsafe { sys::vsync_link_set_page_only(self.raw.as_ptr(), page_only) })
    }

    /// Paused, vsyncd sends nothing for the link.
    pub fn set_paused(&self, paused: bool) -> Result<(), Error> {
        self.check(unsafe { sys::vsync_link_set_paused(self.raw.as_ptr(), paused) })
    }

    /// Runs `f` on the link's display events (mode changed, off, on, waiting).
    pub fn on_display<F: FnMut(&DisplayEvent) + 'c>(&self, f: F) -> Result<(), Error> {
        let callbacks = unsafe { &*self.callbacks };
        *callbacks.display.try_borrow_mut().map_err(|_| busy())? = Some(Box::new(f));
        self.check(unsafe { sys::vsync_link_set_display_callback(self.raw.as_ptr(), Some(display_trampoline)) })
    }

    /// Runs `f` on the link's errors (the daemon went away, the display is gone, ...). Connection
    /// errors come once per link until the next handshake; the client reconnects by itself.
    pub fn on_error<F: FnMut(&Error) + 'c>(&self, f: F) -> Result<(), Error> {
        let callbacks = unsafe { &*self.callbacks };
        *callbacks.error.try_borrow_mut().map_err(|_| busy())? = Some(Box::new(f));
        self.check(unsafe { sys::vsync_link_set_error_callback(self.raw.as_ptr(), Some(error_trampoline)) })
    }

    /// The display's exact refresh (mHz) and frame interval (ns), as vsyncd last said; 0 before.
    pub fn refresh(&self) -> Result<(u64, u64), Error> {
        let (mut mhz, mut period) = (0u64, 0u64);
        self.check(unsafe { sys::vsync_link_get_refresh(self.raw.as_ptr(), &mut mhz, &mut period) })?;
        Ok((mhz, period))
    }

    /// The refresh rounded to whole frames per second (59.94 Hz gives 60); 0 before vsyncd answered.
    pub fn max_fps(&self) -> Result<u32, Error> {
        let rc = unsafe { sys::vsync_link_get_max_fps(self.raw.as_ptr()) };
        self.check(rc)?;
        Ok(rc as u32)
    }
}

fn busy() -> Error {
    Error::Busy("a link's callback cannot be replaced from inside itself".into())
}

impl Drop for Link<'_> {
    fn drop(&mut self) {
        // The library calls the link's callbacks no more after this; then its closures go.
        unsafe {
            sys::vsync_link_destroy(self.raw.as_ptr());
            drop(Box::from_raw(self.callbacks));
        }
    }
}
