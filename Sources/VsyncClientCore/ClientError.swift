internal import CVsyncSys

#if !VSYNC_EMBEDDED
    import VsyncCore
#endif

/// Why a client is not ticking. Each describes itself in one line that says what to do; the
/// same lines reach DisplayLink's `errorHandler` and libvsync's error callback.
public enum ClientError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Nothing listens on the socket (ENOENT or ECONNREFUSED). The client keeps retrying and
    /// starts ticking on its own once the daemon is up.
    case noDaemon(socketPath: String)
    /// The socket exists but this user may not connect to it (EACCES/EPERM).
    case permissionDenied(socketPath: String)
    /// Connecting or talking to the daemon failed for another reason (`errno`).
    case connectionFailed(socketPath: String, errno: Int32)
    /// The daemon closed the connection (it stopped or restarted). The client reconnects by itself.
    case connectionLost(socketPath: String)
    /// The daemon refused the handshake (version unsupported, too many clients, …).
    case refused(reason: String)
    /// No display matches the subscription's selector.
    case displayNotFound(selector: String, reason: String)
    /// The subscription's display was unplugged or its card went away.
    case displayGone(name: String)
    /// The daemon rejected a request (rate, pause, …).
    case requestFailed(code: UInt16, reason: String)
    /// The daemon sent something this library cannot read.
    case protocolViolation(String)

    /// libvsync's `VSYNC_E*` number for this error (returned negated by its calls).
    public var code: ClientErrorCode {
        switch self {
        case .noDaemon: .noDaemon
        case .permissionDenied: .permissionDenied
        case .connectionFailed: .connectionFailed
        case .connectionLost: .connectionLost
        case .refused: .refused
        case .displayNotFound: .displayNotFound
        case .displayGone: .displayGone
        case .requestFailed: .requestFailed
        case .protocolViolation: .protocolViolation
        }
    }

    public var description: String {
        switch self {
        case .noDaemon(let path):
            if path == VsyncClient.defaultSocketPath {
                return "no vsyncd at \(path): start it with 'systemctl start vsyncd.socket'"
            }
            return "no vsyncd at \(path): start 'vsyncd --socket \(path)' or fix VSYNCD_SOCKET"
        case .permissionDenied(let path):
            return "permission denied on \(path): this process may not reach vsyncd's socket; "
                + "a sandbox needs --filesystem=/run/vsyncd, and an older vsyncd lets only group 'video' in"
        case .connectionFailed(let path, let code):
            return "cannot connect to vsyncd at \(path): \(String(cString: vsync_sys_strerror(code))) (errno \(code))"
        case .connectionLost(let path):
            return "vsyncd at \(path) closed the connection: reconnecting; restart vsyncd if this persists"
        case .refused(let reason):
            return "vsyncd refused the connection: \(reason)"
        case .displayNotFound(let selector, let reason):
            return "no display \(selector): \(reason); list displays with 'vsync-probe list'"
        case .displayGone(let name):
            return "display \(name) is gone: create a new link for another display"
        case .requestFailed(let code, let reason):
            return "vsyncd rejected a request (error \(code)): \(reason)"
        case .protocolViolation(let what):
            return "unreadable message from vsyncd: \(what); upgrade the client library or vsyncd"
        }
    }

    /// What a failed connect or send means for the app.
    public static func forErrno(_ err: Int32, path: String) -> ClientError {
        switch err {
        case ENOENT, ECONNREFUSED, ENOTDIR: .noDaemon(socketPath: path)
        case EACCES, EPERM: .permissionDenied(socketPath: path)
        default: .connectionFailed(socketPath: path, errno: err)
        }
    }
}

/// The errno values libvsync returns negated (its `VSYNC_E*`), and `vsync_strerror` explains.
/// Linux's numbers, so `strerror(-rc)` is right too; the C header repeats them, and tests check
/// both against `<errno.h>`.
public enum ClientErrorCode: Int32, Sendable, CaseIterable {
    case noDaemon = 111  // ECONNREFUSED
    case permissionDenied = 13  // EACCES
    case connectionFailed = 5  // EIO
    case connectionLost = 104  // ECONNRESET
    case refused = 103  // ECONNABORTED
    case displayNotFound = 19  // ENODEV
    case displayGone = 6  // ENXIO
    case requestFailed = 121  // EREMOTEIO
    case protocolViolation = 71  // EPROTO
    /// A bad argument (libvsync only: NULL pointer, invalid frame-rate range).
    case invalidArgument = 22  // EINVAL
    /// Out of memory (libvsync only).
    case outOfMemory = 12  // ENOMEM
    /// The daemon did not answer in time (libvsync's connect and display list).
    case timedOut = 110  // ETIMEDOUT
    /// The link's client was destroyed (libvsync only).
    case notConnected = 107  // ENOTCONN
    /// Called from inside a callback, where it may not be (libvsync only).
    case busy = 16  // EBUSY
    /// No timing page: not connected yet, or a vsyncd older than protocol 5 (libvsync only).
    case noTimingPage = 61  // ENODATA
    /// The display has no record on the timing page (libvsync only).
    case notOnTimingPage = 2  // ENOENT
    /// The display's record stayed locked for 1000 tries (libvsync only).
    case timingBusy = 11  // EAGAIN

    /// The one line `vsync_strerror` gives for the code alone (no socket path to name). Static,
    /// so libvsync can hand out the literal's own NUL-terminated bytes.
    public var message: StaticString {
        switch self {
        case .noDaemon: "no vsyncd is listening: start it with 'systemctl start vsyncd.socket' or check VSYNCD_SOCKET"
        case .permissionDenied:
            "permission denied on the vsyncd socket: a sandbox needs --filesystem=/run/vsyncd; an older vsyncd lets only group 'video' in"
        case .connectionFailed: "cannot connect to vsyncd: see the client's last error for the system's reason"
        case .connectionLost: "vsyncd closed the connection: reconnecting; restart vsyncd if this persists"
        case .refused: "vsyncd refused the connection: see the client's last error for its reason"
        case .displayNotFound: "no display matches: list displays with 'vsync-probe list'"
        case .displayGone: "the display is gone: create a new link for another display"
        case .requestFailed: "vsyncd rejected a request: see the client's last error for its reason"
        case .protocolViolation: "unreadable message from vsyncd: upgrade the client library or vsyncd"
        case .invalidArgument: "invalid argument: check the call's parameters against vsync.h"
        case .outOfMemory: "out of memory"
        case .timedOut: "vsyncd did not answer in time: check that it is running and not stuck"
        case .notConnected: "the link's client was destroyed: only vsync_link_destroy may be called on it"
        case .busy: "not allowed inside a libvsync callback: call it after vsync_client_dispatch returns"
        case .noTimingPage: "no timing page yet: connect first (a page-only link keeps it current), or update vsyncd (protocol 5)"
        case .notOnTimingPage: "the display is not on vsyncd's timing page: list displays with 'vsync-probe list'"
        case .timingBusy: "the display's timing record stayed locked: try again (vsyncd may have died while writing it)"
        }
    }
}

extension DisplaySelector {
    /// How error messages name the selector.
    public var displayName: String {
        switch self {
        case .primary: "primary"
        case .crtc(let id): "crtc \(id)"
        case .connector(let name): "'\(name)'"
        case .display(let id): "display \(id)"
        case .match(let m): "'\(m.text)'"
        }
    }
}
