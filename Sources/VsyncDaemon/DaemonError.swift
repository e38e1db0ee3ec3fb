import Glibc
import VsyncCore
import VsyncDRM

/// Why vsyncd cannot start, or runs without something: each case is one line saying what
/// failed, why, and what to do.
public enum DaemonError: Error, CustomStringConvertible, Sendable {
    /// A kernel object the event loop is made of (epoll, a timerfd, the signalfd).
    case system(SystemCallError)
    /// Socket activation passed fd 3, and it is no socket.
    case activatedNotASocket(errno: Int32)
    /// Socket activation passed a socket of the wrong kind.
    case activatedWrongKind
    case socketPathTooLong(path: String, bytes: Int)
    case socketUnavailable(errno: Int32)
    case bind(path: String, errno: Int32)
    case listen(path: String, errno: Int32)
    /// Something else is at the socket's path.
    case pathTaken(path: String)
    case alreadyServing(path: String)
    /// No card in /dev/dri at all.
    case noCard(DRMError)
    /// A card named with --device would not open.
    case card(DRMError)
    /// Cards are there, and none opened.
    case noUsableCard(DRMError?)
    case timerRate(hertz: Double)
    case replaySpeed(ReplaySpeed)
    case replayUnopenable(path: String, errno: Int32)
    case replayUnreadable(path: String, reason: String)
    /// The timing page could not be made (the daemon serves without it).
    case timingPage(step: String, errno: Int32)

    public var description: String {
        switch self {
        case .system(let e):
            e.description + Self.hint(e.code)
        case .activatedNotASocket(let e):
            "socket activation: fd 3 is not a socket (\(errnoText(e))): check vsyncd.socket"
        case .activatedWrongKind:
            "socket activation: fd 3 is not an AF_UNIX SOCK_SEQPACKET socket: set ListenSequentialPacket= in vsyncd.socket"
        case .socketPathTooLong(let path, let bytes):
            "socket path \(path) is too long (\(bytes) bytes, at most 107): use a shorter --socket"
        case .socketUnavailable(let e):
            "cannot create a unix socket: \(errnoText(e))" + Self.hint(e)
        case .bind(let path, let e):
            "cannot bind \(path): \(errnoText(e))"
                + (e == EACCES ? ": run vsyncd as a user who may write there, or pick another --socket" : "")
        case .listen(let path, let e):
            "cannot listen on \(path): \(errnoText(e))"
        case .pathTaken(let path):
            "\(path) exists and is not a socket: remove it or pick another --socket"
        case .alreadyServing(let path):
            "another vsyncd is already serving \(path): stop it first or pick another --socket"
        case .noCard(let e):
            e.description + "; or run vsyncd --source timer:HZ for synthetic ticks"
        case .card(let e):
            e.description
        case .noUsableCard(let e):
            e?.description ?? "no usable DRM card in /dev/dri"
        case .timerRate(let hertz):
            "timer rate \(hertz) Hz is out of range: use --source timer:HZ with 1 ≤ HZ ≤ 1000"
        case .replaySpeed(let s):
            "replay speed \(s) is out of range: use --source replay:FILE@SPEED with 0 < SPEED ≤ 1000"
        case .replayUnopenable(let path, let e):
            "cannot open replay trace \(path): \(errnoText(e)); give --source replay:FILE with a trace from vsync-probe record"
        case .replayUnreadable(let path, let reason):
            "replay trace \(path) is unreadable, \(reason): record one with vsync-probe record"
        case .timingPage(let step, let e):
            "no timing page: \(step): \(errnoText(e))"
        }
    }

    /// What to do about a kernel call's errno, where there is something to do.
    private static func hint(_ e: Int32) -> String {
        switch e {
        case EMFILE, ENFILE: ": raise LimitNOFILE or lower --max-clients"
        case ENOMEM: ": the machine is out of memory"
        default: ""
        }
    }
}
