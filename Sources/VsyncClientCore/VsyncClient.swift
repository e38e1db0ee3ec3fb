internal import CVsyncSys

#if !VSYNC_EMBEDDED
    import VsyncCore
#endif

/// The client side of the vsyncd protocol over one socket, as a state machine that owns no
/// thread: the core of both DisplayLink and libvsync.
///
/// It does the handshake, renews every subscription after a reconnect (with backoff), keeps
/// the requests a full socket did not take, reads every datagram waiting and keeps only the
/// newest tick per subscription (the ticks it replaced are added to `skipped`), and turns
/// display events and errors into ``ClientEvent``s. Nothing blocks but
/// ``dispatch(timeoutMs:)``, and only for as long as it is asked to.
///
/// One fd for the app's loop: ``fileDescriptor`` is an epoll set holding the socket (which
/// changes across reconnects) and a timerfd for retries, the handshake deadline and the idle
/// close. It is readable exactly when ``dispatch(timeoutMs:)`` has work to do.
///
/// Not thread-safe: one thread at a time (DisplayLink guards it with a lock). Ownership: the
/// client owns the epoll fd, the timerfd and the socket, and closes them in `deinit`.
public final class VsyncClient {
    public static let defaultSocketPath = "/run/vsyncd/vsyncd.sock"

    /// Opens the connection: the socket fd, or -errno. Tests hand in one end of a socketpair.
    public struct Connector: Sendable {
        public let open: @Sendable (String) -> Int32
        public init(_ open: @escaping @Sendable (String) -> Int32) { self.open = open }
        public static let unixSocket = Connector { path in vsync_sys_connect_unix(path) }
    }

    public struct Configuration: Sendable {
        public var socketPath: String
        /// For the daemon's log (HELLO's client name).
        public var clientName: String
        /// Reconnect backoff: first retry after 50 ms, doubling to 500 ms, so a restarted daemon
        /// is found again well within a second.
        public var initialBackoffNs: UInt64 = 50_000_000
        public var maximumBackoffNs: UInt64 = 500_000_000
        /// A daemon that accepts but never answers HELLO is given up on after this long. Under
        /// socket activation the first client's HELLO waits while systemd starts the daemon,
        /// which can take seconds on a slow machine (4.5 s seen under qemu TCG).
        public var handshakeTimeoutNs: UInt64 = 10_000_000_000
        /// With no subscriptions left the socket stays open this long, so an app that ends a
        /// link and makes a new one does not pay for a new handshake.
        public var idleCloseNs: UInt64 = 1_000_000_000
        public var connector: Connector = .unixSocket

        public init(socketPath: String, clientName: String) {
            self.socketPath = socketPath
            self.clientName = clientName
        }
    }

    /// `explicit`, else `$VSYNCD_SOCKET`, else ``defaultSocketPath``.
    public static func resolvedSocketPath(_ explicit: String?) -> String {
        if let explicit, !explicit.isEmpty { return explicit }
        if let env = vsync_sys_getenv("VSYNCD_SOCKET") {
            let value = String(cString: env)
            if !value.isEmpty { return value }
        }
        return defaultSocketPath
    }

    public let configuration: Configuration
    var socketPath: String { configuration.socketPath }

    // The fds this client owns.
    let epollFD: Int32
    let timerFD: Int32
    var socketFD: Int32 = -1
    /// The socket is in blocking mode (ours are; a test's socketpair may not be) with a receive
    /// timeout, so the steady state can wait in the read itself and a signal still ends it.
    var socketBlocks = false

    /// Handshake done on the current socket.
    var ready = false
    var welcomeMessage: Welcome?
    var handshakeDeadline: UInt64 = 0
    var backoff: UInt64
    /// When to try connecting again while there is no socket (0: at once).
    var retryAt: UInt64 = 0
    /// When the last subscription went, while the socket is still open.
    var idleSince: UInt64?
    /// EPOLLOUT is asked for: the outbox holds what a full socket did not take.
    var wantWrite = false
    /// The deadline the timerfd is armed for (0: disarmed), so the steady state re-arms nothing.
    var armedDeadline: UInt64 = 0

    var subscriptions = IDTable<SubscriptionInfo>()
    /// Errors already reported per subscription since the last handshake, so a retry loop
    /// reports each failure once. Key 0: the client's own (no subscription).
    var reportedErrors: [UInt32: ClientError] = [:]
    var nextID: UInt32 = 1
    /// Requests waiting to be sent, in order; only filled while the handshake is done.
    var outbox: [ClientMessage] = []
    /// New subscriptions whose SUBSCRIBE waits for the next dispatch, so settings made right
    /// after creating one (rate, work duration, pause) travel in it and its first tick already
    /// obeys them. The timerfd keeps the client's fd readable until then.
    var unsentSubscriptions: [UInt32] = []
    /// LIST_DISPLAYS sent and DISPLAY_LIST read on this connection: answers come in order, so the
    /// list read when they are equal answers the newest request.
    var displayListsRequested = 0
    var displayListsReceived = 0
    var lastDisplayList: [DisplayInfo] = []
    /// The timing page (protocol 5), mapped from TIMING_PAGE's descriptor; it outlives
    /// connections and is unmapped when the last reference goes (VsyncClient+TimingPage.swift).
    public let timingPage = TimingPageMapping()
    /// Page-paced subscriptions' aims (VsyncClient+PagePacing.swift).
    var pagePacers = IDTable<PagePacer>()
    /// A protocol 5 WELCOME came and nothing after it yet: TIMING_PAGE, if the daemon has one, is next.
    var awaitingPage = false
    /// The most recent error, for libvsync's `vsync_client_last_error`.
    public internal(set) var lastError: ClientError?

    // Events for the caller, consumed with nextEvent().
    var events: [ClientEvent] = []
    var eventCursor = 0

    // Storage reused on every read, so a tick allocates nothing. Allocated once and held by
    // pointer: an array property would cost a runtime exclusivity check at every access, on
    // every frame.
    static let batch = 8
    let buffers: UnsafeMutableRawBufferPointer
    let lengths: UnsafeMutableBufferPointer<Int32>
    /// The descriptor each datagram carried (SCM_RIGHTS), or -1: only TIMING_PAGE's is kept.
    let receivedFDs: UnsafeMutableBufferPointer<Int32>
    var pendingTicks: [(tick: Tick, replaced: UInt32, received: UInt64)] = []

    /// Creates the client; it connects when the first subscription is made, or on ``connect(timeoutNs:)``.
    public init(_ configuration: Configuration) throws(ClientError) {
        self.configuration = configuration
        backoff = configuration.initialBackoffNs
        let ep = vsync_sys_epoll_create()
        guard ep >= 0 else {
            throw .connectionFailed(socketPath: configuration.socketPath, errno: vsync_sys_errno())
        }
        let timer = vsync_sys_timerfd_create()
        guard timer >= 0 else {
            let err = vsync_sys_errno()
            _ = vsync_sys_close(ep)
            throw .connectionFailed(socketPath: configuration.socketPath, errno: err)
        }
        let rc = vsync_sys_epoll_ctl(ep, EPOLL_CTL_ADD, timer, EPOLLIN.rawValue)
        guard rc == 0 else {
            _ = vsync_sys_close(timer)
            _ = vsync_sys_close(ep)
            throw .connectionFailed(socketPath: configuration.socketPath, errno: -rc)
        }
        epollFD = ep
        timerFD = timer
        buffers = .allocate(byteCount: Self.batch * WireProtocol.maxMessageSize, alignment: 8)
        buffers.initializeMemory(as: UInt8.self, repeating: 0)
        lengths = .allocate(capacity: Self.batch)
        lengths.initialize(repeating: 0)
        receivedFDs = .allocate(capacity: Self.batch)
        receivedFDs.initialize(repeating: -1)
        pendingTicks.reserveCapacity(4)
        events.reserveCapacity(8)
    }

    deinit {
        buffers.deallocate()
        lengths.deallocate()
        receivedFDs.deallocate()
        if socketFD >= 0 { _ = vsync_sys_close(socketFD) }
        _ = vsync_sys_close(timerFD)
        _ = vsync_sys_close(epollFD)
    }

    // MARK: The app's loop

    /// The fd to poll for reading (poll, epoll, GLib, libuv, a game loop). Stays the same for
    /// the client's life, across reconnects.
    public var fileDescriptor: Int32 { epollFD }

    /// True while connected and handshaken.
    public var isConnected: Bool { ready }

    /// No subscriptions and no socket: nothing is due, and nothing will make the fd readable
    /// by itself (DisplayLink's reader thread ends then).
    public var isIdle: Bool { subscriptions.isEmpty && socketFD < 0 }

    /// Makes the fd readable at once, so a thread waiting on it without the client's lock
    /// wakes and dispatches (the next dispatch re-arms the timer as due).
    public func wake() {
        _ = vsync_sys_timerfd_set(timerFD, 1)
        armedDeadline = 1
    }

    /// The daemon's WELCOME on the current connection.
    public var welcome: Welcome? { ready ? welcomeMessage : nil }

    /// Waits up to `timeoutMs` (0: not at all, -1: forever) for the socket or a deadline, then
    /// does everything pending: connects or reconnects, reads every datagram waiting, sends
    /// queued requests. Returns how many frames it added to the events; take them, with the
    /// other events, from ``nextEvent()``.
    ///
    /// A signal ends the wait early (0 frames), also one whose handler has SA_RESTART. In the
    /// steady state (handshaken, subscribed, nothing queued, no deadline) a wait without limit
    /// blocks in the socket's read itself, so a tick costs one syscall, as a plain `recv` loop
    /// does; the socket's receive timeout keeps the kernel from restarting that read after a
    /// signal (`vsync_sys_set_interruptible`), and `epoll_wait` is never restarted.
    @discardableResult
    public func dispatch(timeoutMs: Int32) -> Int {
        if timeoutMs < 0 && isSteady {
            var frames = drain(waiting: true)
            let now = vsync_sys_now_ns()
            frames += pagePace(now: now)  // a SUBSCRIBED just read may start a page-paced subscription
            finish(now: now)
            return frames
        }
        if timeoutMs != 0 {
            _ = vsync_sys_epoll_wait(epollFD, timeoutMs)
        }
        return process(now: vsync_sys_now_ns())
    }

    /// Only the socket can bring work: nothing to send, no retry, handshake or idle deadline,
    /// and no events waiting to be taken.
    var isSteady: Bool {
        ready && socketBlocks && !wantWrite && outbox.isEmpty && unsentSubscriptions.isEmpty && armedDeadline == 0
            && eventCursor >= events.count
    }

    /// Waits up to `timeoutMs` (-1: forever) until the client with this ``fileDescriptor`` has
    /// work, without touching the client: a thread that shares a client under a lock (as
    /// DisplayLink's reader thread does) waits here without holding it, then dispatches with 0.
    /// `epoll_wait` on the fd itself, which is cheaper than `poll` on it (no nested poll).
    public static func wait(fileDescriptor: Int32, timeoutMs: Int32) {
        _ = vsync_sys_epoll_wait(fileDescriptor, timeoutMs)
    }

    /// The next event from the last dispatches, oldest first; nil when all were taken.
    public func nextEvent() -> ClientEvent? {
        guard eventCursor < events.count else {
            if !events.isEmpty {
                events.removeAll(keepingCapacity: true)
                eventCursor = 0
            }
            return nil
        }
        let event = events[eventCursor]
        eventCursor += 1
        return event
    }

    /// Connects now if there is no connection and waits for the handshake, up to `timeoutNs`.
    /// Nil once handshaken; else why not (the client keeps retrying from ``dispatch(timeoutMs:)``
    /// while it has subscriptions). Events met meanwhile stay queued.
    public func connect(timeoutNs: UInt64) -> ClientError? {
        let deadline = vsync_sys_now_ns() &+ timeoutNs
        if socketFD < 0 {
            openSocket(now: vsync_sys_now_ns())
            updateTimer(now: vsync_sys_now_ns())
        }
        while !ready {
            // A failed connect or a refusal closed the socket: lastError says why.
            guard socketFD >= 0 else { return lastError }
            let now = vsync_sys_now_ns()
            guard now < deadline else { return .connectionFailed(socketPath: socketPath, errno: ETIMEDOUT) }
            _ = vsync_sys_epoll_wait(epollFD, Int32(min((deadline - now + 999_999) / 1_000_000, 60_000)))
            process(now: vsync_sys_now_ns())
        }
        awaitTimingPage(until: deadline)
        return nil
    }

    // MARK: Subscriptions

    /// Subscribes to `selector` at a rate from `range` and returns the subscription's id. It
    /// is sent at the next dispatch (with whatever was set on it by then; the fd is readable
    /// until that dispatch), or after the handshake; every reconnect renews it.
    /// A `workDurationNs` above 0 asks to be woken that long before each target vblank
    /// (protocol 2; an older daemon ignores it and wakes the client just after each vblank).
    public func subscribe(
        _ selector: DisplaySelector, range: FrameRateRange, paused: Bool = false, flags: SubscribeFlags = [],
        workDurationNs: UInt64 = 0
    ) -> UInt32 {
        var id = nextID
        while id == 0 || subscriptions[id] != nil { id = id == UInt32.max ? 1 : id + 1 }
        nextID = id == UInt32.max ? 1 : id + 1
        let info = SubscriptionInfo(
            selector: selector, range: range, flags: flags.subtracting(.startPaused),
            paused: paused, active: true, display: nil, divisor: 0, displayIntervalNs: 0,
            workDurationNs: min(workDurationNs, WorkDuration.maximumNs))
        subscriptions[id] = info
        idleSince = nil
        let now = vsync_sys_now_ns()
        if ready {
            unsentSubscriptions.append(id)
        } else if socketFD < 0 && now >= retryAt {
            // Connect from the caller's thread at once; a retry not yet due waits for the timer.
            openSocket(now: now)
        }
        updateTimer(now: now)
        return id
    }

    /// A new frame-rate range; the daemon answers with a SUBSCRIBED carrying the new divisor.
    public func setRange(_ id: UInt32, _ range: FrameRateRange) {
        guard var info = subscriptions[id] else { return }
        info.range = range
        subscriptions[id] = info
        if isSent(id, info) { send(.setRate(SetRate(subscriptionID: id, range: range))) }
    }

    /// A new work duration (ns, at most one second; 0: woken just after each vblank). The daemon
    /// answers with a SUBSCRIBED; a protocol 1 daemon cannot pace, and it is kept for a newer one.
    public func setWorkDuration(_ id: UInt32, _ ns: UInt64) {
        guard var info = subscriptions[id] else { return }
        info.workDurationNs = min(ns, WorkDuration.maximumNs)
        subscriptions[id] = info
        if isSent(id, info) && (welcomeMessage?.version ?? 1) >= 2 {
            send(.setWorkDuration(SetWorkDuration(subscriptionID: id, workDurationNs: info.workDurationNs)))
        }
    }

    /// Predicted frames while the display is off, or not.
    public func setPredictWhileOff(_ id: UInt32, _ on: Bool) { setFlag(.predictWhileOff, on, for: id) }

    /// Every tick from a real vblank, or not (protocol 6): with it the daemon keeps the display's
    /// vblank interrupt on under sparse sampling, at the power that sampling saves.
    public func setHardwareTicks(_ id: UInt32, _ on: Bool) { setFlag(.hardwareTicks, on, for: id) }

    /// One subscribe flag on or off. The daemon takes flags only with a subscription, so a sent
    /// subscription is renewed under the same id.
    func setFlag(_ flag: SubscribeFlags, _ on: Bool, for id: UInt32) {
        guard var info = subscriptions[id], info.flags.contains(flag) != on else { return }
        if on { info.flags.insert(flag) } else { info.flags.remove(flag) }
        subscriptions[id] = info
        if isSent(id, info) {
            send(.unsubscribe(subscriptionID: id))
            send(subscribeMessage(id, info))
        }
    }

    /// Pauses or resumes; paused, the daemon sends nothing, and ticks already on the way are dropped.
    public func setPaused(_ id: UInt32, _ paused: Bool) {
        guard var info = subscriptions[id], info.paused != paused else { return }
        info.paused = paused
        subscriptions[id] = info
        if isSent(id, info) { send(paused ? .pause(subscriptionID: id) : .resume(subscriptionID: id)) }
    }

    /// Ends the subscription. Its frames and events still queued are dropped.
    public func unsubscribe(_ id: UInt32) {
        guard subscriptions.removeValue(forKey: id) != nil else { return }
        reportedErrors[id] = nil
        if let unsent = unsentSubscriptions.firstIndex(of: id) {
            unsentSubscriptions.remove(at: unsent)
        } else if ready {
            send(.unsubscribe(subscriptionID: id))
        }
        let now = vsync_sys_now_ns()
        if subscriptions.isEmpty && socketFD >= 0 { idleSince = now }
        updateTimer(now: now)
    }

    /// The subscription as last heard of; nil if `id` is not live.
    public func subscription(_ id: UInt32) -> SubscriptionInfo? { subscriptions[id] }

    /// The live subscriptions' ids, in order.
    public var subscriptionIDs: [UInt32] { subscriptions.keys }

    /// The daemon has the subscription, so a change must be sent as its own request; else the
    /// SUBSCRIBE still to come carries it.
    func isSent(_ id: UInt32, _ info: SubscriptionInfo) -> Bool {
        ready && info.active && !unsentSubscriptions.contains(id)
    }

    func subscribeMessage(_ id: UInt32, _ info: SubscriptionInfo) -> ClientMessage {
        .subscribe(
            Subscribe(
                subscriptionID: id, selector: info.selector, range: info.range,
                flags: info.paused ? info.flags.union(.startPaused) : info.flags,
                workDurationNs: info.workDurationNs))
    }
}
