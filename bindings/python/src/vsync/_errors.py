"""The exceptions: VsyncError and a subclass per cause, each carrying libvsync's one line."""
from . import _lib
from ._lib import lib


class VsyncError(Exception):
    """A libvsync failure. str(error) is the one line; .errno the errno value."""

    def __init__(self, errno, message):
        super().__init__(message)
        self.errno = errno
        self.message = message


class NoDaemonError(VsyncError, ConnectionRefusedError):
    """No vsyncd listens on the socket: start vsyncd.socket, or check VSYNCD_SOCKET."""


class PermissionDeniedError(VsyncError, PermissionError):
    """The user may not connect: add it to the socket's group."""


class ConnectionLostError(VsyncError, ConnectionResetError):
    """vsyncd closed the connection; the client reconnects by itself."""


class NoDisplayError(VsyncError):
    """No display matches the link's selector."""


class DisplayGoneError(VsyncError):
    """The link's display was unplugged or its card went away."""


class InvalidArgumentError(VsyncError, ValueError):
    """A bad argument."""


class TimedOutError(VsyncError, TimeoutError):
    """vsyncd did not answer in time."""


class NoTimingPageError(VsyncError, LookupError):
    """No timing page: not connected yet, or a vsyncd without protocol 5."""


class NotOnTimingPageError(VsyncError, LookupError):
    """The display has no record on the timing page."""


_ERRORS = {
    _lib.ENODAEMON: NoDaemonError, _lib.EACCES: PermissionDeniedError, _lib.ECONNLOST: ConnectionLostError,
    _lib.ENODISPLAY: NoDisplayError, _lib.EDISPLAYGONE: DisplayGoneError, _lib.EINVAL: InvalidArgumentError,
    _lib.ETIMEDOUT: TimedOutError, _lib.ENOPAGE: NoTimingPageError, _lib.ENOTONPAGE: NotOnTimingPageError,
}
# Errors after which a link gets no more frames by itself: the iterators raise them.
_FATAL = {_lib.ENODISPLAY, _lib.EDISPLAYGONE, _lib.EREQUEST, _lib.EPROTO, _lib.EREFUSED}


def _error(rc, line=None):
    errno = abs(rc)
    if not line:
        line = lib().vsync_strerror(rc).decode(errors="replace")
    return _ERRORS.get(errno, VsyncError)(errno, line)
