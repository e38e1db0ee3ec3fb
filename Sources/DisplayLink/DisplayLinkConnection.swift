import Foundation
import Glibc
import VsyncCore

/// The process's one connection to a vsyncd socket, shared by every ``DisplayLink`` on it.
///
/// One reader thread owns the socket: it connects (never blocking), does the handshake,
/// drains every datagram on each wake-up and hands each link only the newest tick
/// (Choreographer-style; the skipped counts of the dropped ones are added to it), sends the
/// links' requests, and reconnects with backoff when the daemon goes away, re-subscribing every
/// link with its current settings. A second after the last link goes it closes the socket and
/// sleeps until a link registers again.
final class DisplayLinkConnection: Sendable {
    static let defaultSocketPath = "/run/vsyncd/vsyncd.sock"
    /// Reconnect backoff: first retry after 50 ms, doubling to 500 ms, so a restarted daemon is
    /// found again well within a second.
    static let initialBackoffNs: UInt64 = 50_000_000
    static let maximumBackoffNs: UInt64 = 500_000_000
    /// Inline delivery (see `State.soleQueue`) makes the reader wait while the queue runs other
    /// work, and meanwhile nothing reads the socket: past the daemon's stall timeout (2 s by
    /// default) the daemon would cut the connection. A queue that once kept the reader waiting
    /// this long is used for long work, so its links go back to `async` delivery for good.
    static let inlineWaitLimitNs: UInt64 = 250_000_000
    /// A daemon that accepts but never answers HELLO is given up on after this long.
    static let handshakeTimeoutNs: UInt64 = 2_000_000_000
    /// With no links left the socket stays open this long (after sending the unsubscribes), so
    /// an app that invalidates a link and makes a new one does not pay for a new handshake.
    static let idleCloseNs: UInt64 = 1_000_000_000

    /// `explicit`, else `$VSYNCD_SOCKET`, else ``defaultSocketPath``.
    static func resolvedPath(_ explicit: String?) -> String {
        if let explicit, !explicit.isEmpty { return explicit }
        if let env = ProcessInfo.processInfo.environment["VSYNCD_SOCKET"], !env.isEmpty { return env }
        return defaultSocketPath
    }

    /// The reader thread's name, as `top -H` and `/proc/PID/task/*/comm` show it (15 bytes at most).
    static let readerThreadName = "DisplayLink"

    private static let connections = Locked<[String: DisplayLinkConnection]>([:])

    /// The connection for `socketPath`, created on first use.
    static func shared(socketPath: String) -> DisplayLinkConnection {
        connections.withLock { all in
            if let existing = all[socketPath] { return existing }
            let created = DisplayLinkConnection(socketPath: socketPath)
            all[socketPath] = created
            return created
        }
    }

    /// A link's subscription as the daemon should see it; re-sent on every reconnect.
    struct Registration {
        let link: DisplayLink
        var selector: DisplaySelector
        var range: FrameRateRange
        var paused: Bool
        /// False after the daemon said the display is unknown or gone, until a display is added.
        var active = true
        var displayID: UInt32?
        /// The last error reported to this link, so a retry loop reports each failure once.
        var lastError: DisplayLinkError?
        /// Set while a queue is the link's only context (see `DisplayLink.State.inlineQueue`).
        var inlineQueue: DispatchQueue?

        func subscribe(id: UInt32) -> ClientMessage {
            .subscribe(Subscribe(subscriptionID: id, selector: selector, range: range,
                                 flags: paused ? [.startPaused] : []))
        }
    }

    struct State {
        var registrations: [UInt32: Registration] = [:]
        var nextID: UInt32 = 1
        /// Requests waiting to be sent; only filled while the handshake is done.
        var outbox: [ClientMessage] = []
        var ready = false
        var threadStarted = false
        /// The queue every link is delivered on, when they all share one that may run inline:
        /// the reader thread then drains the socket inside `sync` on it, so a tick wakes one
        /// thread instead of two. With links on several contexts, nil: queues are then posted
        /// to with `async`, so no queue's backlog can hold up another's links.
        var soleQueue: DispatchQueue?
        /// Set for good once the reader waited too long for the sole queue (see
        /// `inlineWaitLimitNs`): from then on its links are posted to with `async`.
        var inlineDisabled = false

        mutating func updateSoleQueue() {
            guard !inlineDisabled else {
                soleQueue = nil
                return
            }
            var sole: DispatchQueue?
            for reg in registrations.values {
                guard let queue = reg.inlineQueue, sole == nil || sole === queue else {
                    soleQueue = nil
                    return
                }
                sole = queue
            }
            soleQueue = sole
        }
    }

    let socketPath: String
    private let state = Locked(State())
    /// A pipe that wakes the reader thread when a link queues a request or registers.
    private let wakeFD: Int32
    private let wakeWriteFD: Int32

    private init(socketPath: String) {
        self.socketPath = socketPath
        var fds: [Int32] = [-1, -1]
        if pipe(&fds) == 0 {
            for fd in fds {
                _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
                _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            }
        }
        wakeFD = fds[0]
        wakeWriteFD = fds[1]
    }

    // MARK: Called by links (any thread)

    func register(_ link: DisplayLink, selector: DisplaySelector, range: FrameRateRange, paused: Bool,
                  inlineQueue: DispatchQueue?) -> UInt32 {
        let (id, startThread) = state.withLock { s -> (UInt32, Bool) in
            let id = s.nextID
            s.nextID = s.nextID == UInt32.max ? 1 : s.nextID + 1
            var reg = Registration(link: link, selector: selector, range: range, paused: paused)
            reg.active = true
            reg.inlineQueue = inlineQueue
            s.registrations[id] = reg
            s.updateSoleQueue()
            if s.ready { s.outbox.append(reg.subscribe(id: id)) }
            let start = !s.threadStarted
            s.threadStarted = true
            return (id, start)
        }
        if startThread {
            let thread = Thread { [self] in
                // Set on the running thread, so the kernel's name (top -H, /proc) is set too.
                Thread.current.name = Self.readerThreadName
                self.run()
            }
            thread.start()
        }
        wake()
        return id
    }

    func unregister(_ id: UInt32) {
        state.withLock { s in
            guard s.registrations.removeValue(forKey: id) != nil else { return }
            s.updateSoleQueue()
            if s.ready { s.outbox.append(.unsubscribe(subscriptionID: id)) }
        }
        wake()
    }

    /// The link's one context became `queue` (or stopped being a single queue).
    func setInlineQueue(_ id: UInt32, _ queue: DispatchQueue?) {
        state.withLock { s in
            guard s.registrations[id] != nil else { return }
            s.registrations[id]?.inlineQueue = queue
            s.updateSoleQueue()
        }
    }

    func setRange(_ id: UInt32, _ range: FrameRateRange) {
        update(id) { reg in
            reg.range = range
            return .setRate(SetRate(subscriptionID: id, range: range))
        }
    }

    func setPaused(_ id: UInt32, _ paused: Bool) {
        update(id) { reg in
            reg.paused = paused
            return paused ? .pause(subscriptionID: id) : .resume(subscriptionID: id)
        }
    }

    private func update(_ id: UInt32, _ change: (inout Registration) -> ClientMessage) {
        state.withLock { s in
            guard var reg = s.registrations[id] else { return }
            let message = change(&reg)
            s.registrations[id] = reg
            if s.ready && reg.active { s.outbox.append(message) }
        }
        wake()
    }

    private func wake() {
        // A full pipe already means "wake up": the write may fail harmlessly.
        var one: UInt8 = 1
        _ = write(wakeWriteFD, &one, 1)
    }

    // MARK: The reader thread

    /// What the reader thread knows about the current socket.
    private struct Session {
        var fd: Int32 = -1
        var ready = false
        var handshakeDeadline: UInt64 = 0
        var wantWrite = false
        var backoff = DisplayLinkConnection.initialBackoffNs
        var retryAt: UInt64 = 0
        /// When the last link went, while the socket is still open.
        var idleSince: UInt64?
    }

    /// The newest tick of one subscription in this drain, with the ticks it replaced.
    private struct PendingTick {
        var tick: Tick
        var replaced: Int
        var received: UInt64
    }

    /// Storage the reader thread reuses on every wake-up, so a tick allocates nothing.
    private struct Scratch {
        var buffer = [UInt8](repeating: 0, count: WireProtocol.maxMessageSize)
        /// The newest tick per subscription in the current drain. Usually one entry or a few,
        /// so a linear search beats hashing.
        var ticks: [PendingTick] = []
        /// This drain's frames with their links, and what each link asked this thread to do.
        var deliveries: [(link: DisplayLink, frame: Frame, delivery: DisplayLink.Delivery)] = []
        /// Requests taken out of the outbox to be sent (swapped, so both keep their capacity).
        var sending: [ClientMessage] = []
        var fds = [pollfd](repeating: pollfd(fd: -1, events: 0, revents: 0), count: 2)
        var sink = [UInt8](repeating: 0, count: 64)

        init() {
            ticks.reserveCapacity(4)
            deliveries.reserveCapacity(4)
        }
    }

    private func run() {
        var session = Session()
        var scratch = Scratch()
        while true {
            // One lock round-trip per loop: whether anyone wants ticks, and what to send.
            let wanted = state.withLock { s -> Bool in
                if session.ready && !s.outbox.isEmpty { swap(&s.outbox, &scratch.sending) }
                return !s.registrations.isEmpty
            }
            if !scratch.sending.isEmpty { flush(&session, &scratch.sending) }
            let now = MonotonicClock.nanoseconds()
            if wanted {
                session.idleSince = nil
            } else if session.fd >= 0 {
                let idleSince = session.idleSince ?? now
                session.idleSince = idleSince
                if now &- idleSince >= Self.idleCloseNs {
                    hangUp(&session)
                    session.idleSince = nil
                    session.backoff = Self.initialBackoffNs
                    session.retryAt = 0
                }
            }
            if wanted && session.fd < 0 && now >= session.retryAt {
                connect(&session, now: now)
            }

            scratch.fds[0] = pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0)
            let nfds = session.fd >= 0 ? 2 : 1
            scratch.fds[1] = pollfd(fd: session.fd, events: Int16(POLLIN) | (session.wantWrite ? Int16(POLLOUT) : 0),
                                    revents: 0)
            var timeout: Int32 = -1
            if wanted && session.fd < 0 {
                timeout = Self.milliseconds(until: session.retryAt, now: now)
            } else if session.fd >= 0 && !session.ready {
                timeout = Self.milliseconds(until: session.handshakeDeadline, now: now)
            }
            if let idleSince = session.idleSince, session.fd >= 0 {
                let untilClose = Self.milliseconds(until: idleSince + Self.idleCloseNs, now: now)
                timeout = timeout < 0 ? untilClose : min(timeout, untilClose)
            }
            let rc = scratch.fds.withUnsafeMutableBufferPointer { poll($0.baseAddress, nfds_t(nfds), timeout) }
            if rc < 0 && errno != EINTR { usleep(10_000) }
            if scratch.fds[0].revents & Int16(POLLIN) != 0 {
                let sinkCount = scratch.sink.count
                while scratch.sink.withUnsafeMutableBytes({ read(wakeFD, $0.baseAddress, sinkCount) }) > 0 {}
            }
            guard session.fd >= 0 else { continue }
            let revents = nfds > 1 ? scratch.fds[1].revents : 0
            if revents & (Int16(POLLIN) | Int16(POLLHUP) | Int16(POLLERR)) != 0 {
                if let queue = state.withLock({ $0.soleQueue }) {
                    // Waits while the queue runs other work; the drain then still takes the
                    // newest tick, so a busy queue skips frames rather than queueing them.
                    let before = MonotonicClock.nanoseconds()
                    var waitedNs: UInt64 = 0
                    queue.sync {
                        waitedNs = MonotonicClock.nanoseconds() &- before
                        drain(&session, &scratch, inlineOn: queue)
                    }
                    if waitedNs > Self.inlineWaitLimitNs {
                        state.withLock { s in
                            s.inlineDisabled = true
                            s.updateSoleQueue()
                        }
                    }
                } else {
                    drain(&session, &scratch, inlineOn: nil)
                }
            }
            if session.fd >= 0 && !session.ready && MonotonicClock.nanoseconds() >= session.handshakeDeadline {
                fail(&session, .connectionFailed(socketPath: socketPath, errno: ETIMEDOUT))
            }
            // A writable socket or requests queued meanwhile (the WELCOME's re-subscribes, say)
            // are flushed at the top of the next loop, before polling again.
        }
    }

    private static func milliseconds(until deadline: UInt64, now: UInt64) -> Int32 {
        guard deadline > now else { return 0 }
        return Int32(min((deadline - now + 999_999) / 1_000_000, 60_000))
    }

    private func connect(_ session: inout Session, now: UInt64) {
        switch UnixSocket.connect(path: socketPath) {
        case .connected(let fd):
            session.fd = fd
            session.ready = false
            session.wantWrite = false
            session.handshakeDeadline = now + Self.handshakeTimeoutNs
            let hello = ClientMessage.hello(Hello(
                minVersion: WireProtocol.minimumVersion, maxVersion: WireProtocol.currentVersion,
                clientName: ProcessInfo.processInfo.processName))
            if case .failed(let err) = UnixSocket.send(fd, hello.encoded()) {
                fail(&session, Self.error(forErrno: err, path: socketPath))
            }
        case .failed(let err):
            // A full listen backlog is not worth telling the app about: just retry.
            if err != EAGAIN { report(Self.error(forErrno: err, path: socketPath)) }
            scheduleRetry(&session, now: now)
        }
    }

    static func error(forErrno err: Int32, path: String) -> DisplayLinkError {
        switch err {
        case ENOENT, ECONNREFUSED, ENOTDIR: .noDaemon(socketPath: path)
        case EACCES, EPERM: .permissionDenied(socketPath: path)
        default: .connectionFailed(socketPath: path, errno: err)
        }
    }

    private func scheduleRetry(_ session: inout Session, now: UInt64) {
        session.retryAt = now + session.backoff
        session.backoff = min(session.backoff * 2, Self.maximumBackoffNs)
    }

    /// Closes the socket; the registrations stay and are re-subscribed on the next connection.
    private func hangUp(_ session: inout Session) {
        if session.fd >= 0 { close(session.fd) }
        session.fd = -1
        session.ready = false
        session.wantWrite = false
        state.withLock { s in
            s.ready = false
            s.outbox.removeAll()
        }
    }

    private func fail(_ session: inout Session, _ error: DisplayLinkError) {
        hangUp(&session)
        report(error)
        scheduleRetry(&session, now: MonotonicClock.nanoseconds())
    }

    /// Tells every link about `error`, once per link until the next successful handshake.
    private func report(_ error: DisplayLinkError) {
        let links = state.withLock { s -> [DisplayLink] in
            var links: [DisplayLink] = []
            for (id, var reg) in s.registrations where reg.lastError != error {
                reg.lastError = error
                s.registrations[id] = reg
                links.append(reg.link)
            }
            return links
        }
        for link in links { link.connectionDidFail(error) }
    }

    /// Sends `messages` (taken out of the outbox) in order; what a full socket did not take
    /// goes back to the front of the outbox. Leaves `messages` empty.
    private func flush(_ session: inout Session, _ messages: inout [ClientMessage]) {
        defer { messages.removeAll(keepingCapacity: true) }
        session.wantWrite = false
        for (i, message) in messages.enumerated() {
            guard session.fd >= 0 && session.ready else { return }
            switch UnixSocket.send(session.fd, message.encoded()) {
            case .sent:
                continue
            case .wouldBlock:
                session.wantWrite = true
                let unsent = messages[i...]
                state.withLock { s in s.outbox.insert(contentsOf: unsent, at: 0) }
                return
            case .failed(let err):
                fail(&session, err == EPIPE || err == ECONNRESET
                     ? .connectionLost(socketPath: socketPath) : Self.error(forErrno: err, path: socketPath))
                return
            }
        }
    }

    /// Reads every datagram waiting, handles control messages in order, then delivers the
    /// newest tick of each subscription. `inlineQueue`: the queue this thread is inside `sync` on.
    private func drain(_ session: inout Session, _ scratch: inout Scratch, inlineOn inlineQueue: DispatchQueue?) {
        var closed = false
        while session.fd >= 0 {
            let n = scratch.buffer.withUnsafeMutableBytes { recv(session.fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            if n == 0 { closed = true; break }
            if n < 0 {
                let err = errno
                if err == EINTR { continue }
                if err != EAGAIN && err != EWOULDBLOCK { closed = true }
                break
            }
            let received = MonotonicClock.nanoseconds()
            let message: ServerMessage?
            do {
                message = try scratch.buffer.withUnsafeBytes { raw throws(WireError) in
                    try ServerMessage.decode(UnsafeRawBufferPointer(rebasing: raw[0..<n]))
                }
            } catch {
                report(.protocolViolation("\(error)"))
                continue
            }
            guard let message else { continue }  // a newer daemon's message type: ignore
            if case .tick(let tick) = message {
                if let i = scratch.ticks.firstIndex(where: { $0.tick.subscriptionID == tick.subscriptionID }) {
                    scratch.ticks[i].replaced += Int(scratch.ticks[i].tick.skipped) + 1
                    scratch.ticks[i].tick = tick
                    scratch.ticks[i].received = received
                } else {
                    scratch.ticks.append(PendingTick(tick: tick, replaced: 0, received: received))
                }
            } else {
                handle(message, &session)
            }
        }
        deliver(&scratch, inlineOn: inlineQueue)
        if closed && session.fd >= 0 {
            let wasReady = session.ready
            hangUp(&session)
            if wasReady {
                // The daemon stopped or restarted: retry almost at once.
                report(.connectionLost(socketPath: socketPath))
                session.backoff = Self.initialBackoffNs
            } else {
                report(.connectionFailed(socketPath: socketPath, errno: ECONNRESET))
            }
            scheduleRetry(&session, now: MonotonicClock.nanoseconds())
        }
    }

    /// Hands each link the newest tick of this drain. Links whose handler runs on this thread
    /// (``DisplayLink/start()``, or inline on the sole queue) go last, so a slow one delays only
    /// the others of its kind.
    private func deliver(_ scratch: inout Scratch, inlineOn inlineQueue: DispatchQueue?) {
        guard !scratch.ticks.isEmpty else { return }
        state.withLock { s in
            for pending in scratch.ticks {
                guard let link = s.registrations[pending.tick.subscriptionID]?.link else { continue }
                scratch.deliveries.append((link, Frame(pending.tick, extraSkipped: pending.replaced,
                                                       receivedNanoseconds: pending.received), .none))
            }
        }
        scratch.ticks.removeAll(keepingCapacity: true)
        var anyOnThisThread = false
        for i in scratch.deliveries.indices {
            let d = scratch.deliveries[i]
            let delivery = d.link.connectionDidDeliver(d.frame, inlineOn: inlineQueue)
            scratch.deliveries[i].delivery = delivery
            if case .none = delivery { continue }
            anyOnThisThread = true
        }
        if anyOnThisThread {
            for d in scratch.deliveries {
                switch d.delivery {
                case .none: break
                case .direct: d.link.runDirectHandler(d.frame)
                case .inline: d.link.fireQueue()
                }
            }
        }
        scratch.deliveries.removeAll(keepingCapacity: true)
    }

    private typealias Frame = DisplayLink.Frame

    private func handle(_ message: ServerMessage, _ session: inout Session) {
        switch message {
        case .welcome:
            session.ready = true
            session.backoff = Self.initialBackoffNs
            state.withLock { s in
                s.ready = true
                s.outbox.removeAll()
                for id in s.registrations.keys.sorted() {
                    s.registrations[id]?.active = true
                    s.registrations[id]?.lastError = nil
                    if let reg = s.registrations[id] { s.outbox.append(reg.subscribe(id: id)) }
                }
            }
        case .refused(let refusal):
            fail(&session, .refused(reason: refusal.message))
            if refusal.code == .versionUnsupported { session.retryAt += 4 * Self.maximumBackoffNs }
        case .subscribed(let answer):
            let link = state.withLock { s -> DisplayLink? in
                s.registrations[answer.subscriptionID]?.displayID = answer.displayID
                return s.registrations[answer.subscriptionID]?.link
            }
            link?.connectionDidSubscribe(answer)
        case .displayEvent(let event):
            handle(event)
        case .error(let error):
            handle(error)
        case .displayList, .tick:
            break
        }
    }

    private func handle(_ event: DisplayEvent) {
        let displayID = event.display.displayID
        switch event.kind {
        case .added:
            // Links whose display was missing get another chance.
            state.withLock { s in
                for (id, reg) in s.registrations where !reg.active {
                    s.registrations[id]?.active = true
                    s.registrations[id]?.lastError = nil
                    if s.ready { s.outbox.append(reg.subscribe(id: id)) }
                }
            }
            wake()
        case .removed:
            let links = state.withLock { s -> [DisplayLink] in
                var links: [DisplayLink] = []
                for (id, reg) in s.registrations where reg.displayID == displayID && reg.active {
                    s.registrations[id]?.active = false
                    if s.ready { s.outbox.append(.unsubscribe(subscriptionID: id)) }
                    links.append(reg.link)
                }
                return links
            }
            for link in links { link.connectionDidFail(.displayGone(name: event.display.connectorName)) }
        case .modeChanged, .off, .on:
            let links = state.withLock { s in
                s.registrations.values.filter { $0.displayID == displayID }.map(\.link)
            }
            for link in links { link.connectionDidReceive(event) }
        }
    }

    private func handle(_ error: ErrorMessage) {
        if error.subscriptionID == 0 {
            // Codes 1–3 mean this library sent something wrong; the daemon hangs up next.
            let links = state.withLock { $0.registrations.values.map(\.link) }
            for link in links {
                link.connectionDidFail(.requestFailed(code: error.code.rawValue, reason: error.message))
            }
            return
        }
        let found = state.withLock { s -> (DisplayLink, DisplaySelector)? in
            guard let reg = s.registrations[error.subscriptionID] else { return nil }
            if error.code == .unknownDisplay { s.registrations[error.subscriptionID]?.active = false }
            return (reg.link, reg.selector)
        }
        guard let (link, selector) = found else { return }
        switch error.code {
        case .unknownSubscription:
            break  // a request raced an unsubscribe or a display removal
        case .unknownDisplay:
            link.connectionDidFail(.displayNotFound(selector: selector.displayName, reason: error.message))
        default:
            link.connectionDidFail(.requestFailed(code: error.code.rawValue, reason: error.message))
        }
    }
}

extension DisplaySelector {
    /// How error messages name the selector.
    var displayName: String {
        switch self {
        case .primary: "primary"
        case .crtc(let id): "crtc \(id)"
        case .connector(let name): "'\(name)'"
        case .display(let id): "display \(id)"
        }
    }
}
