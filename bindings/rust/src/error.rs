use crate::sys;
use std::ffi::CStr;
use std::fmt;
use std::os::raw::c_int;

/// Why a call failed, or why a link stopped ticking. Each variant carries libvsync's one line
/// saying what failed and what to do (`Display` prints it); [`Error::errno`] is the errno value.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// No vsyncd listens on the socket (ECONNREFUSED): start `vsyncd.socket`.
    NoDaemon(String),
    /// The user may not connect (EACCES): add it to the socket's group.
    PermissionDenied(String),
    /// Connecting or talking to vsyncd failed otherwise (EIO); the line names the system's reason.
    ConnectionFailed(String),
    /// vsyncd closed the connection (ECONNRESET); the client reconnects by itself.
    ConnectionLost(String),
    /// vsyncd refused the handshake (ECONNABORTED): version, client caps.
    Refused(String),
    /// No display matches the link's selector (ENODEV).
    NoDisplay(String),
    /// The link's display was unplugged or its card went away (ENXIO).
    DisplayGone(String),
    /// vsyncd rejected a request (EREMOTEIO).
    RequestRejected(String),
    /// An unreadable message from vsyncd (EPROTO).
    Protocol(String),
    /// A bad argument (EINVAL).
    InvalidArgument(String),
    /// Out of memory (ENOMEM).
    OutOfMemory(String),
    /// vsyncd did not answer in time (ETIMEDOUT).
    TimedOut(String),
    /// The link's client is gone (ENOTCONN).
    NotConnected(String),
    /// Not allowed inside a callback (EBUSY).
    Busy(String),
    /// No timing page (ENODATA): not connected yet, or a vsyncd without protocol 5.
    NoTimingPage(String),
    /// The display has no record on the timing page (ENOENT).
    NotOnTimingPage(String),
    /// The display's timing record stayed locked for 1000 tries (EAGAIN).
    TimingBusy(String),
    /// Another errno value.
    Other { errno: i32, message: String },
}

impl Error {
    /// The error for libvsync's return code `rc` (a negative errno) with its whole line (or ""
    /// for the code's own line from `vsync_strerror`).
    pub fn from_code(rc: c_int, line: String) -> Error {
        let errno = rc.abs();
        let message = if line.is_empty() {
            unsafe { CStr::from_ptr(sys::vsync_strerror(rc)).to_string_lossy().into_owned() }
        } else {
            line
        };
        match errno {
            sys::VSYNC_ENODAEMON => Error::NoDaemon(message),
            sys::VSYNC_EACCES => Error::PermissionDenied(message),
            sys::VSYNC_ECONNECT => Error::ConnectionFailed(message),
            sys::VSYNC_ECONNLOST => Error::ConnectionLost(message),
            sys::VSYNC_EREFUSED => Error::Refused(message),
            sys::VSYNC_ENODISPLAY => Error::NoDisplay(message),
            sys::VSYNC_EDISPLAYGONE => Error::DisplayGone(message),
            sys::VSYNC_EREQUEST => Error::RequestRejected(message),
            sys::VSYNC_EPROTO => Error::Protocol(message),
            sys::VSYNC_EINVAL => Error::InvalidArgument(message),
            sys::VSYNC_ENOMEM => Error::OutOfMemory(message),
            sys::VSYNC_ETIMEDOUT => Error::TimedOut(message),
            sys::VSYNC_ENOTCONN => Error::NotConnected(message),
            sys::VSYNC_EBUSY => Error::Busy(message),
            sys::VSYNC_ENOPAGE => Error::NoTimingPage(message),
            sys::VSYNC_ENOTONPAGE => Error::NotOnTimingPage(message),
            sys::VSYNC_EAGAIN => Error::TimingBusy(message),
            _ => Error::Other { errno, message },
        }
    }

    /// The errno value (positive): what `std::io::Error::from_raw_os_error` takes.
    pub fn errno(&self) -> i32 {
        match self {
            Error::NoDaemon(_) => sys::VSYNC_ENODAEMON,
            Error::PermissionDenied(_) => sys::VSYNC_EACCES,
            Error::ConnectionFailed(_) => sys::VSYNC_ECONNECT,
            Error::ConnectionLost(_) => sys::VSYNC_ECONNLOST,
            Error::Refused(_) => sys::VSYNC_EREFUSED,
            Error::NoDisplay(_) => sys::VSYNC_ENODISPLAY,
            Error::DisplayGone(_) => sys::VSYNC_EDISPLAYGONE,
            Error::RequestRejected(_) => sys::VSYNC_EREQUEST,
            Error::Protocol(_) => sys::VSYNC_EPROTO,
            Error::InvalidArgument(_) => sys::VSYNC_EINVAL,
            Error::OutOfMemory(_) => sys::VSYNC_ENOMEM,
            Error::TimedOut(_) => sys::VSYNC_ETIMEDOUT,
            Error::NotConnected(_) => sys::VSYNC_ENOTCONN,
            Error::Busy(_) => sys::VSYNC_EBUSY,
            Error::NoTimingPage(_) => sys::VSYNC_ENOPAGE,
            Error::NotOnTimingPage(_) => sys::VSYNC_ENOTONPAGE,
            Error::TimingBusy(_) => sys::VSYNC_EAGAIN,
            Error::Other { errno, .. } => *errno,
        }
    }

    /// The one line: what failed, why, what to do.
    pub fn message(&self) -> &str {
        match self {
            Error::NoDaemon(m)
            | Error::PermissionDenied(m)
            | Error::ConnectionFailed(m)
            | Error::ConnectionLost(m)
            | Error::Refused(m)
            | Error::NoDisplay(m)
            | Error::DisplayGone(m)
            | Error::RequestRejected(m)
            | Error::Protocol(m)
            | Error::InvalidArgument(m)
            | Error::OutOfMemory(m)
            | Error::TimedOut(m)
            | Error::NotConnected(m)
            | Error::Busy(m)
            | Error::NoTimingPage(m)
            | Error::NotOnTimingPage(m)
            | Error::TimingBusy(m) => m,
            Error::Other { message, .. } => message,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for Error {}

impl From<Error> for std::io::Error {
    fn from(e: Error) -> std::io::Error {
        std::io::Error::new(std::io::Error::from_raw_os_error(e.errno()).kind(), e)
    }
}
