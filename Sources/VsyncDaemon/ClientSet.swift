import Glibc
import Logging
import VsyncCore

/// The connected clients by socket, which of them are blocked (socket full) and since when
/// (`BlockedClients`), and the listening socket with what throttles accepting on it.
final class ClientSet: Sequence {
    let listener: ListeningSocket
    private var byFD: [Int32: Client] = [:]
    private var blocked = BlockedClients()
    var blockedCount: Int { blocked.count }
    /// Clients came, went, blocked, drained, or changed what they wait for, or the listener
    /// paused: the status line and the housekeeping plan are redone once, at the end of the
    /// loop turn (`Server.replanIfChanged`).
    var changed = true
    /// Reused for every received datagram (the hot path allocates nothing).
    let receiveBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: WireProtocol.maxMessageSize + 1, alignment: 8)

    // Accept throttling: a flood of connections or a lack of descriptors costs a log line a
    // second and a paused listener, never a spinning loop.
    /// Held open so that a refusal can still be accepted and sent when out of descriptors.
    var spare: FileDescriptor? = FileDescriptor(opening: "/dev/null", O_RDONLY)
    private var acceptFailures = 0
    private var lastAcceptLogNs: UInt64 = 0
    private var refusalsSinceLog = 0
    private var lastRefusalLogNs: UInt64 = 0
    /// The listener is out of epoll until then (`pauseListener`).
    private(set) var listenerPausedUntilNs: UInt64?

    init(listener: ListeningSocket) { self.listener = listener }
    deinit { receiveBuffer.deallocate() }

    var count: Int { byFD.count }
    /// The dictionary's own iterator, over a copy: a client disconnected midway is still seen.
    func makeIterator() -> Dictionary<Int32, Client>.Values.Iterator { byFD.values.makeIterator() }

    func add(_ client: Client) {
        byFD[client.fd] = client
        changed = true
    }

    func remove(_ client: Client) {
        unblock(client)
        byFD[client.fd] = nil
        changed = true
    }

    // MARK: - Blocked clients

    /// Its socket is full: the stall clock starts, unless it runs already.
    func markBlocked(_ client: Client) {
        guard client.blockedSinceNs == nil else { return }
        if blocked.mark(client, now: monotonicNow()) { changed = true }
    }

    /// A client that drains at all is slow, not stalled: its stall clock restarts.
    func drained(_ client: Client) {
        guard client.blockedSinceNs != nil else { return }
        blocked.restart(client, now: monotonicNow())
    }

    /// Nothing of it waits any more. Housekeeping is re-planned when the last blocked client
    /// drains, so many draining in one frame cost one scan of the clients, not one each.
    func unblock(_ client: Client) {
        if blocked.clear(client), blocked.count == 0 { changed = true }
    }

    /// The clients whose socket has been full for over `boundNs`.
    func stalled(now: UInt64, boundNs: UInt64) -> [Client] {
        guard blocked.count > 0 else { return [] }
        return byFD.values.filter { c in c.blockedSinceNs.map { now &- $0 > boundNs } ?? false }
    }

    // MARK: - Accept throttling

    /// An accept failed: logged at most once a second, with how many there were.
    func noteAcceptFailure(_ e: Int32, logger: Logger) {
        acceptFailures += 1
        let now = monotonicNow()
        if now &- lastAcceptLogNs >= 1_000_000_000 {
            logger.error(
                "accept failed: \(errnoText(e))\(acceptFailures > 1 ? " (\(acceptFailures) times in the last second)" : "")\(e == EMFILE || e == ENFILE ? ": raise LimitNOFILE or lower --max-clients" : "")"
            )
            lastAcceptLogNs = now
            acceptFailures = 0
        }
    }

    /// A connection refused: logged at most once a second with a count, so a flood of
    /// connections cannot flood the log.
    func noteRefusal(_ peer: @autoclosure () -> String, _ log: String, logger: Logger) {
        refusalsSinceLog += 1
        let now = monotonicNow()
        if now &- lastRefusalLogNs >= 1_000_000_000 {
            let more = refusalsSinceLog > 1 ? " (\(refusalsSinceLog) refusals in the last second)" : ""
            logger.warning("client \(peer()) refused: \(log)\(more)")
            lastRefusalLogNs = now
            refusalsSinceLog = 0
        }
    }

    /// Could not even refuse: the listener leaves epoll for a moment rather than spin.
    func pauseListener(until: UInt64) {
        listenerPausedUntilNs = until
        changed = true
    }

    /// The pause is over (housekeeping): true if the listener is to be watched again.
    func listenerPauseEnds(now: UInt64) -> Bool {
        guard let until = listenerPausedUntilNs, now >= until else { return false }
        listenerPausedUntilNs = nil
        changed = true
        return true
    }
}
