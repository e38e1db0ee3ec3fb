import CLinux
import Glibc
import VsyncCore

/// One connected client socket. Lives on the event loop's thread only.
///
/// Output never blocks: control messages wait in a bounded `outbox`, ticks are coalesced per
/// subscription (`pendingTicks`). `blockedSinceNs` is set while the socket is full, so
/// the server can disconnect a client that stays full past the stall bound.
final class Client {
    /// Closed when the client object goes, after its disconnect.
    let socket: FileDescriptor
    var fd: Int32 { socket.raw }
    let pid: Int32
    let uid: UInt32
    /// The Flatpak app id of a sandboxed client (`Peer.appID`), which shares its user's caps with
    /// the user's other programs only up to half of them.
    let appID: String?
    var name = ""
    /// The protocol version agreed at HELLO; nil before it.
    private(set) var version: UInt16?
    /// What that version lets the connection do, decided once at HELLO (none before it).
    private(set) var features: ProtocolFeatures = []
    var subscriptions: [UInt32: Subscription] = [:]
    /// Subscriptions to a display that is not there yet (protocol 2), by id: attached when it appears.
    var waiting: [UInt32: Subscribe] = [:]
    var outbox: [[UInt8]] = []
    var outboxHead = 0
    /// The newest unsent tick of each subscription that has one (its socket was full), in the
    /// order they became pending: ticks are coalesced here, never queued. The only copy.
    var pendingTicks: [(sub: Subscription, tick: Tick)] = []

    /// Where `sub`'s pending tick is. A client has a few subscriptions: a scan beats a hash.
    func pendingIndex(of sub: Subscription) -> Int? {
        pendingTicks.firstIndex { $0.sub === sub }
    }
    /// EPOLLOUT is registered.
    var watchingOutput = false
    /// Set when the client is being disconnected; nothing more is sent or read.
    var closeReason: String?

    static let maxOutbox = 256

    init(socket: consuming FileDescriptor, pid: Int32, uid: UInt32, appID: String? = nil) {
        self.socket = socket
        self.pid = pid
        self.uid = uid
        self.appID = appID
    }

    /// HELLO agreed on `version`: what the connection can do is fixed from here.
    func handshaken(version: UInt16) {
        self.version = version
        features = ProtocolFeatures(version: version)
    }

    /// The version messages to it are encoded at: its own, or the oldest before HELLO.
    var encodingVersion: UInt16 { version ?? WireProtocol.minimumVersion }

    var label: String {
        let who = "pid \(pid) uid \(uid)" + (appID.map { " app \($0)" } ?? "")
        return name.isEmpty ? who : "\(who) '\(name)'"
    }

    /// Since when its socket has been full; nil while it is not. Set and cleared only by
    /// `BlockedClients` (below), which counts the clients it is set on.
    fileprivate(set) var blockedSinceNs: UInt64?

    /// Its socket was full, or messages or ticks wait behind a full one: nothing is sent to it
    /// directly. One load on the tick path, so the stall clock is kept on the client itself.
    var isBlocked: Bool { blockedSinceNs != nil || outboxHead < outbox.count || !pendingTicks.isEmpty }

    enum SendResult {
        case sent, full
        case failed(Int32)
    }

    /// One non-blocking datagram send; a full socket (EAGAIN, or ENOBUFS) is `.full`.
    @inline(__always)
    static func send(_ fd: Int32, _ base: UnsafeRawPointer?, _ count: Int) -> SendResult {
        do throws(SystemCallError) {
            return try nonBlocking("send", { Glibc.send(fd, base, count, Int32(MSG_DONTWAIT | MSG_NOSIGNAL)) }) == nil ? .full : .sent
        } catch {
            return error.code == ENOBUFS ? .full : .failed(error.code)
        }
    }

    /// One datagram with `descriptor` attached (SCM_RIGHTS), as `send`.
    func send(_ bytes: [UInt8], with descriptor: Int32) -> SendResult {
        do throws(SystemCallError) {
            let n = try nonBlocking("sendmsg", { bytes.withUnsafeBytes { vsyncd_send_with_fd(fd, $0.baseAddress, $0.count, descriptor) } })
            return n == nil ? .full : .sent
        } catch {
            return error.code == ENOBUFS ? .full : .failed(error.code)
        }
    }
}

/// The clients whose socket is full: each one's stall clock (`Client.blockedSinceNs`) and how
/// many there are, changed together and only here, so housekeeping knows whether any client is
/// blocked without scanning them all. Held by `ClientSet`.
struct BlockedClients {
    private(set) var count = 0

    /// `client` blocked at `now`; false if it already was (its clock keeps running).
    mutating func mark(_ client: Client, now: UInt64) -> Bool {
        guard client.blockedSinceNs == nil else { return false }
        client.blockedSinceNs = now
        count += 1
        return true
    }

    /// It drained some: slow, not stalled, so its stall clock restarts.
    func restart(_ client: Client, now: UInt64) {
        if client.blockedSinceNs != nil { client.blockedSinceNs = now }
    }

    /// Nothing of it waits any more; false if it was not blocked.
    mutating func clear(_ client: Client) -> Bool {
        guard client.blockedSinceNs != nil else { return false }
        client.blockedSinceNs = nil
        count -= 1
        return true
    }
}
