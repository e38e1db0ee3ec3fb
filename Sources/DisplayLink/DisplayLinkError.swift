import VsyncCore

/// Why a ``DisplayLink`` is not ticking. Delivered to ``DisplayLink/errorHandler`` on the
/// link's own context (its run loop or queue); each describes itself in one line that says
/// what to do.
public enum DisplayLinkError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Nothing listens on the socket (ENOENT or ECONNREFUSED). The link keeps retrying and
    /// starts ticking on its own once the daemon is up.
    case noDaemon(socketPath: String)
    /// The socket exists but this user may not connect to it (EACCES/EPERM).
    case permissionDenied(socketPath: String)
    /// Connecting or talking to the daemon failed for another reason (`errno`).
    case connectionFailed(socketPath: String, errno: Int32)
    /// The daemon closed the connection (it stopped or restarted). The link reconnects by itself.
    case connectionLost(socketPath: String)
    /// The daemon refused the handshake (version unsupported, too many clients, …).
    case refused(reason: String)
    /// No display matches the link's selector.
    case displayNotFound(selector: String, reason: String)
    /// The link's display was unplugged or its card went away.
    case displayGone(name: String)
    /// The daemon rejected a request of this link (rate, pause, …).
    case requestFailed(code: UInt16, reason: String)
    /// The daemon sent something this library cannot read.
    case protocolViolation(String)

    public var description: String {
        switch self {
        case .noDaemon(let path):
            if path == DisplayLinkConnection.defaultSocketPath {
                return "no vsyncd at \(path): start it with 'systemctl start vsyncd.socket'"
            }
            return "no vsyncd at \(path): start 'vsyncd --socket \(path)' or fix VSYNCD_SOCKET"
        case .permissionDenied(let path):
            return "permission denied on \(path): add the user to group 'video' and log in again"
        case .connectionFailed(let path, let code):
            return "cannot connect to vsyncd at \(path): \(String(cString: strerror(code))) (errno \(code))"
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
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
