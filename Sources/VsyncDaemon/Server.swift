import Glibc
import Logging
import VsyncCore

/// vsyncd's server: one epoll loop, one thread, over the vblank source, the listening socket,
/// the clients, a signalfd and a housekeeping timer.
///
/// Nothing here blocks: client sockets are non-blocking and ticks to a full socket are
/// coalesced (see `Client`). Client input is decoded by the bounds-checked codec; anything
/// malformed disconnects that client only.
final class Server {
    private enum Role { case listener, signal, housekeeping, source, client }

    let configuration: DaemonConfiguration
    let logger: Logger
    private let source: VBlankSource
    private let listener: ListeningSocket
    private let notifier: SystemdNotifier?
    private let epoll: Epoll
    private let signalFD: Int32
    private let housekeeping: TimerFD
    private var housekeepingInterval: UInt64?
    private var lastWatchdogNs: UInt64 = 0

    private var roles: [Int32: Role] = [:]
    private var sourceFDs: Set<Int32> = []
    private var clients: [Int32: Client] = [:]
    private var displays: [Display] = []
    private var nextDisplayID: UInt32 = 1
    private var running = true
    private var lastStatus = ""
    /// Clients or displays changed since STATUS= was last sent (checked once per loop turn).
    private var statusDirty = true
    private var lastRescanNs: UInt64 = 0
    /// Held open so that a refusal can still be accepted and sent when out of descriptors.
    private var spareFD: Int32 = open("/dev/null", O_RDONLY | O_CLOEXEC)
    private var acceptFailures = 0
    private var lastAcceptLogNs: UInt64 = 0
    private var listenerPausedUntilNs: UInt64?

    /// Reused buffers: received datagrams and encoded ticks (the hot path allocates nothing).
    private let receiveBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: WireProtocol.maxMessageSize + 1, alignment: 8)
    private let tickBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Tick.wireSize, alignment: 8)

    /// The send buffer each client socket gets. Small on purpose: the socket buffer is itself a
    /// queue of stale ticks, so it should hold only a few frames (it must fit one 4096-byte message).
    static let clientSendBuffer: Int32 = 8192

    init(configuration: DaemonConfiguration, source: VBlankSource, listener: ListeningSocket,
         notifier: SystemdNotifier?, signalFD: Int32, logger: Logger) throws(DaemonError) {
        self.configuration = configuration
        self.source = source
        self.listener = listener
        self.notifier = notifier
        self.signalFD = signalFD
        self.logger = logger
        epoll = try Epoll()
        housekeeping = try TimerFD()
        try register(listener.fd, .listener)
        try register(signalFD, .signal)
        try register(housekeeping.fd, .housekeeping)
    }

    deinit {
        if spareFD >= 0 { close(spareFD) }
        receiveBuffer.deallocate()
        tickBuffer.deallocate()
    }

    private func register(_ fd: Int32, _ role: Role, events: UInt32 = Epoll.readable) throws(DaemonError) {
        try epoll.add(fd, events: events)
        roles[fd] = role
    }

    private func unregister(_ fd: Int32) {
        epoll.remove(fd)
        roles[fd] = nil
    }

    // MARK: - Run

    /// Opens the displays, tells systemd it is ready, and serves until SIGTERM/SIGINT.
    func run() throws(DaemonError) {
        rescanDisplays(announce: false)
        logger.info("vsyncd ready on \(listener.description): \(displays.count) display(s), source \(source.isSynthetic ? "timer" : "drm")")
        notifier?.notify("READY=1\n" + statusLine())
        updateHousekeeping()
        while running {
            epoll.wait(timeoutMs: -1) { fd, events in
                guard running else { return }
                switch roles[fd] {
                case .listener: acceptClients()
                case .signal: readSignal()
                case .housekeeping: housekeeping.drain(); doHousekeeping()
                case .source: handleSource(fd)
                case .client: if let c = clients[fd] { handleClient(c, events: events) }
                case nil: break  // closed earlier in this batch
                }
            }
            publishStatus()
        }
        shutdown()
    }

    private func readSignal() {
        var info = [UInt8](repeating: 0, count: 128)  // struct signalfd_siginfo
        let n = info.withUnsafeMutableBytes { read(signalFD, $0.baseAddress, 128) }
        guard n >= 4 else { return }
        let signo = info.withUnsafeBytes { $0.load(as: UInt32.self) }
        logger.info("stopping on \(signo == UInt32(SIGTERM) ? "SIGTERM" : signo == UInt32(SIGINT) ? "SIGINT" : "signal \(signo)")")
        running = false
    }

    private func shutdown() {
        notifier?.notify("STOPPING=1")
        for client in Array(clients.values) { disconnect(client, reason: "daemon stopping", level: .info) }
        for d in displays where d.vblankActive { try? source.setActive(d.key, false) }
        logger.info("vsyncd stopped")
    }

    // MARK: - Status and housekeeping

    private func statusLine() -> String {
        let on = displays.filter { $0.state == .on }.count
        return "STATUS=\(displays.count) display(s) (\(on) on), \(clients.count) client(s)"
    }

    private func publishStatus() {
        guard notifier != nil, statusDirty else { return }
        statusDirty = false
        let status = statusLine()
        if status != lastStatus {
            lastStatus = status
            notifier?.notify(status)
        }
    }

    /// The housekeeping timer runs only while there is work (active displays, displays off with
    /// subscribers, stalled clients) or a watchdog to feed: an idle daemon never wakes up.
    private func updateHousekeeping() {
        let busy = displays.contains { $0.vblankActive || ($0.state == .off && !$0.subscriptions.isEmpty) }
            || clients.values.contains { $0.blockedSinceNs != nil }
        var interval: UInt64? = busy ? 250_000_000 : nil
        if listenerPausedUntilNs != nil { interval = 100_000_000 }
        if let w = notifier?.watchdogIntervalNs { interval = min(interval ?? w, w) }
        guard interval != housekeepingInterval else { return }
        housekeepingInterval = interval
        if let interval { housekeeping.arm(everyNs: interval) } else { housekeeping.disarm() }
    }

    private func doHousekeeping() {
        let now = monotonicNow()
        if let until = listenerPausedUntilNs, now >= until {
            listenerPausedUntilNs = nil
            do { try register(listener.fd, .listener) } catch { logger.error("\(error)") }
        }
        if let w = notifier?.watchdogIntervalNs, now &- lastWatchdogNs >= w * 9 / 10 {
            lastWatchdogNs = now
            notifier?.notify("WATCHDOG=1")
        }
        let stallNs = UInt64(configuration.stallTimeout * 1e9)
        for client in Array(clients.values) {
            if let since = client.blockedSinceNs, now &- since > stallNs {
                disconnect(client, reason: "socket full for over \(configuration.stallTimeout) s (client stopped reading)", level: .warning)
            }
        }
        for d in displays {
            if d.vblankActive, now &- d.lastRecheckNs >= 1_000_000_000 {
                recheck(d, now: now)
            } else if d.state == .off, !d.subscriptions.isEmpty, now &- d.lastRecheckNs >= 500_000_000 {
                recheck(d, now: now)
            } else if d.state == .on, d.wantsVBlank, !d.vblankActive, now &- d.lastRecheckNs >= 1_000_000_000 {
                // A transient source error stopped events: try again once a second.
                d.lastRecheckNs = now
                updateVBlank(d)
            }
        }
        updateHousekeeping()
    }

    // MARK: - Displays

    private var primaryID: UInt32? {
        (displays.first { $0.state == .on } ?? displays.first)?.id
    }

    private func info(_ d: Display) -> DisplayInfo {
        d.info(isPrimary: d.id == primaryID, synthetic: source.isSynthetic)
    }

    private func syncSourceDescriptors() {
        let wanted = Set(source.pollDescriptors)
        for fd in sourceFDs.subtracting(wanted) { unregister(fd) }
        for fd in wanted.subtracting(sourceFDs) {
            do { try register(fd, .source) } catch { logger.error("\(error)") }
        }
        sourceFDs = wanted
    }

    /// Adds displays the source now has and removes those it no longer has.
    private func rescanDisplays(announce: Bool) {
        statusDirty = true
        lastRescanNs = monotonicNow()
        let found = source.rescan()
        syncSourceDescriptors()
        let keys = Set(found.map(\.key))
        for d in displays where !keys.contains(d.key) { removeDisplay(d, reason: "no longer on its card") }
        for s in found where s.isActive && !displays.contains(where: { $0.key == s.key }) {
            let d = Display(id: nextDisplayID, source: s)
            nextDisplayID += 1
            displays.append(d)
            logger.info("display \(d.id) added: \(s.connectorName) on \(s.key), \(s.refresh.map { "\($0)" } ?? "no mode"), \(s.width)x\(s.height)")
            if announce {
                let message = ServerMessage.displayEvent(DisplayEvent(kind: .added, display: info(d))).encoded()
                for c in clients.values where c.version != nil { send(message, to: c) }
            }
        }
        updateHousekeeping()
    }

    /// A CRTC lit after startup on a card already open raises no event the daemon can watch
    /// (netlink is outside its sandbox), so a client asking about displays triggers a rescan,
    /// at most twice a second.
    private func rescanIfStale() {
        let now = monotonicNow()
        guard now &- lastRescanNs >= 500_000_000 else { return }
        rescanDisplays(announce: true)
    }

    private func removeDisplay(_ d: Display, reason: String) {
        statusDirty = true
        logger.warning("display \(d.id) (\(d.source.connectorName) on \(d.key)) removed: \(reason)")
        if d.vblankActive { try? source.setActive(d.key, false) }
        d.vblankActive = false
        d.state = .off
        let message = ServerMessage.displayEvent(DisplayEvent(kind: .removed, display: info(d))).encoded()
        var told = Set<Int32>()
        for sub in d.subscriptions {
            sub.client.subscriptions[sub.id] = nil
            sub.client.pendingTicks.removeAll { $0 === sub }
            settle(sub.client)
            if told.insert(sub.client.fd).inserted { send(message, to: sub.client) }
        }
        d.subscriptions = []
        displays.removeAll { $0 === d }
    }

    /// Re-reads a display's CRTC and reports what changed.
    private func recheck(_ d: Display, now: UInt64 = monotonicNow()) {
        d.lastRecheckNs = now
        guard let fresh = source.refresh(d.key) else {
            removeDisplay(d, reason: "its CRTC or card is gone")
            updateHousekeeping()
            return
        }
        let old = d.source
        d.source = fresh
        if !fresh.isActive {
            if d.state == .on { turnOff(d) }
        } else if d.state == .off {
            turnOn(d, modeChanged: !fresh.sameMode(as: old))
        } else if !fresh.sameMode(as: old) {
            logger.info("display \(d.id) mode changed: \(old.refresh.map { "\($0)" } ?? "?") \(old.width)x\(old.height) → \(fresh.refresh.map { "\($0)" } ?? "?") \(fresh.width)x\(fresh.height)")
            d.resetModel()
            broadcastEvent(.modeChanged, d)
            resubscribeAll(d)
        }
    }

    private func turnOff(_ d: Display) {
        statusDirty = true
        logger.info("display \(d.id) (\(d.source.connectorName)) is off")
        if d.vblankActive { try? source.setActive(d.key, false) }
        d.vblankActive = false
        d.state = .off
        for sub in d.subscriptions { sub.resetDelivery() }
        broadcastEvent(.off, d)
        updateHousekeeping()
    }

    private func turnOn(_ d: Display, modeChanged: Bool) {
        statusDirty = true
        logger.info("display \(d.id) (\(d.source.connectorName)) is on: \(d.source.refresh.map { "\($0)" } ?? "?")")
        d.state = .on
        d.resetModel()
        broadcastEvent(.on, d)
        if modeChanged { broadcastEvent(.modeChanged, d) }
        resubscribeAll(d)
        updateVBlank(d)
    }

    private func broadcastEvent(_ kind: DisplayEventKind, _ d: Display) {
        let message = ServerMessage.displayEvent(DisplayEvent(kind: kind, display: info(d))).encoded()
        var told = Set<Int32>()
        for sub in d.subscriptions where told.insert(sub.client.fd).inserted { send(message, to: sub.client) }
    }

    /// Recomputes every subscriber's divisor for the display's current refresh and re-sends SUBSCRIBED.
    private func resubscribeAll(_ d: Display) {
        for sub in d.subscriptions {
            sub.divisor = RateMapping.divisor(for: sub.range, refreshHz: d.refreshHz)
            sub.resetDelivery()
            send(subscribed(sub).encoded(), to: sub.client)
        }
    }

    private func subscribed(_ sub: Subscription) -> ServerMessage {
        let d = sub.display
        return .subscribed(Subscribed(
            subscriptionID: sub.id, displayID: d.id, divisor: sub.divisor,
            displayIntervalNs: d.periodNs, clientIntervalNs: d.periodNs * UInt64(sub.divisor), display: info(d)))
    }

    /// Asks the source for vblanks exactly while someone is listening.
    private func updateVBlank(_ d: Display) {
        let want = d.wantsVBlank
        guard want != d.vblankActive else { return }
        do throws(VBlankFailure) {
            try source.setActive(d.key, want)
            d.vblankActive = want
            if want { d.lastRecheckNs = monotonicNow() }
            logger.debug("display \(d.id): vblank events \(want ? "on" : "off")")
        } catch {
            handleFailure(d, error)
        }
        updateHousekeeping()
    }

    private func handleFailure(_ d: Display, _ failure: VBlankFailure) {
        switch failure {
        case .off:
            d.vblankActive = false
            if d.state == .on { turnOff(d) }
        case .gone:
            logger.error("display \(d.id): its device \(d.key.device) is gone")
            rescanDisplays(announce: true)
            if displays.contains(where: { $0 === d }) { removeDisplay(d, reason: "device gone") }
        case .other(let text):
            d.vblankActive = false
            logger.error("display \(d.id): vblank events failed: \(text)")
        }
        updateHousekeeping()
    }

    // MARK: - Vblanks and ticks

    private func handleSource(_ fd: Int32) {
        for event in source.readEvents(from: fd) {
            switch event {
            case let .vblank(key, sequence, timestamp):
                guard let d = displays.first(where: { $0.key == key }), d.vblankActive, d.state == .on else { continue }
                vblank(d, sequence: sequence, timestampNs: timestamp)
            case let .failed(key, failure):
                guard let d = displays.first(where: { $0.key == key }) else { continue }
                handleFailure(d, failure)
            case .devicesChanged:
                rescanDisplays(announce: true)
            }
        }
    }

    private func vblank(_ d: Display, sequence: UInt64, timestampNs: UInt64) {
        // A vblank interval off the model by > 0.5 % may be a mode change nobody announced:
        // re-read the CRTC now rather than at the next once-a-second check.
        // A display whose intervals keep deviating without a mode change (VRR, a noisy clock) is
        // re-read at most once a second, by housekeeping, after a few fruitless tries.
        if let last = d.lastSample, sequence == last.sequence &+ 1, timestampNs > last.timestampNs {
            let interval = Double(timestampNs - last.timestampNs)
            if abs(interval - d.model.periodNs) > 0.005 * d.model.periodNs {
                if d.fruitlessRechecks < 3 {
                    let before = d.source
                    recheck(d)
                    guard d.state == .on, displays.contains(where: { $0 === d }) else { return }
                    if d.source.sameMode(as: before) { d.fruitlessRechecks += 1 }
                }
            } else {
                d.fruitlessRechecks = 0
            }
        }
        if d.model.add(sequence: sequence, timestampNs: timestampNs) == .restarted {
            // The model saw the period change on its own: make sure the mode is re-read soon.
            d.fruitlessRechecks = 0
        }
        d.lastSample = (sequence, timestampNs)
        let interval = d.periodNs
        let flags: TickFlags = source.isSynthetic ? .synthetic : .hardwareTimestamp
        for sub in d.subscriptions where !sub.paused {
            let divisor = UInt64(sub.divisor)
            guard RateMapping.isTickDue(sequence: sequence, divisor: sub.divisor) else { continue }
            if let last = sub.lastDueSequence, sequence > last {
                // Due ticks whose vblank never reached us count as skipped too.
                sub.skipped &+= UInt32(clamping: sequence / divisor - last / divisor - 1)
            }
            sub.lastDueSequence = sequence
            let tick = Tick(
                subscriptionID: sub.id, displayID: d.id, sequence: sequence, timestampNs: timestampNs,
                targetTimestampNs: d.model.predictedTimestamp(forSequence: sequence &+ divisor),
                displayIntervalNs: interval, clientIntervalNs: interval &* divisor,
                skipped: 0, divisor: sub.divisor, flags: flags)
            offer(tick, to: sub)
        }
    }

    /// Sends a tick now if the client's socket has room, else keeps it as the newest pending one.
    private func offer(_ tick: Tick, to sub: Subscription) {
        let client = sub.client
        guard client.closeReason == nil else { return }
        if sub.pending != nil {
            sub.skipped &+= 1  // the older pending tick is replaced, never sent
            sub.pending = tick
            return
        }
        if !client.isBlocked {
            switch sendTick(tick, sub) {
            case .sent: return
            case .full: break
            case .failed(let e): sendFailed(client, e); return
            }
        }
        sub.pending = tick
        client.pendingTicks.append(sub)
        markBlocked(client)
    }

    private func sendTick(_ tick: Tick, _ sub: Subscription) -> Client.SendResult {
        var t = tick
        t.skipped = sub.skipped
        let n = t.encode(into: tickBuffer)
        let result = Client.send(sub.client.fd, tickBuffer.baseAddress, n)
        if case .sent = result { sub.skipped = 0 }
        return result
    }

    // MARK: - Client output

    private func sendFailed(_ client: Client, _ e: Int32) {
        let reason = e == EPIPE || e == ECONNRESET ? "closed by client" : "send failed: \(errnoText(e))"
        disconnect(client, reason: reason, level: .info)
    }

    private func markBlocked(_ client: Client) {
        if client.blockedSinceNs == nil {
            client.blockedSinceNs = monotonicNow()
            updateHousekeeping()
        }
        if !client.watchingOutput {
            client.watchingOutput = true
            epoll.modify(client.fd, events: Epoll.readable | Epoll.writable)
        }
    }

    /// Sends a control message in order behind anything already waiting.
    private func send(_ message: [UInt8], to client: Client) {
        guard client.closeReason == nil else { return }
        if !client.isBlocked {
            switch message.withUnsafeBytes({ Client.send(client.fd, $0.baseAddress, $0.count) }) {
            case .sent: return
            case .full: break
            case .failed(let e): sendFailed(client, e); return
            }
        }
        guard client.outbox.count - client.outboxHead < Client.maxOutbox else {
            disconnect(client, reason: "over \(Client.maxOutbox) messages waiting (client stopped reading)", level: .warning)
            return
        }
        client.outbox.append(message)
        markBlocked(client)
    }

    /// EPOLLOUT: control messages first, then the newest pending tick of each subscription.
    private func flush(_ client: Client) {
        // A client that drains at all is slow, not stalled: the stall clock restarts.
        defer { if client.blockedSinceNs != nil { client.blockedSinceNs = monotonicNow() } }
        while client.outboxHead < client.outbox.count {
            let result = client.outbox[client.outboxHead].withUnsafeBytes { Client.send(client.fd, $0.baseAddress, $0.count) }
            switch result {
            case .sent: client.outboxHead += 1
            case .full: return
            case .failed(let e): sendFailed(client, e); return
            }
        }
        client.outbox.removeAll(keepingCapacity: true)
        client.outboxHead = 0
        while let sub = client.pendingTicks.first {
            guard let tick = sub.pending else { client.pendingTicks.removeFirst(); continue }
            switch sendTick(tick, sub) {
            case .sent:
                sub.pending = nil
                client.pendingTicks.removeFirst()
            case .full: return
            case .failed(let e): sendFailed(client, e); return
            }
        }
        settle(client)
    }

    /// A client with nothing left to send is not stalled, even if its socket is still full
    /// (e.g. it paused or unsubscribed while blocked).
    private func settle(_ client: Client) {
        guard client.closeReason == nil, client.outboxHead >= client.outbox.count,
              client.pendingTicks.isEmpty else { return }
        client.blockedSinceNs = nil
        if client.watchingOutput {
            client.watchingOutput = false
            epoll.modify(client.fd, events: Epoll.readable)
        }
        updateHousekeeping()
    }

    // MARK: - Clients

    /// Answers one waiting connection with a refusal when out of file descriptors: the spare
    /// descriptor is freed for the accept and taken back after. Without this the listening socket
    /// stays readable and the loop would spin on EMFILE.
    private func refuseWithSpareDescriptor() -> Bool {
        guard spareFD >= 0 else { return false }
        close(spareFD)
        spareFD = -1
        let fd = accept(listener.fd, nil, nil)
        if fd >= 0 {
            let refusal = ServerMessage.refused(Refusal(
                code: .tooManyClients, message: "vsyncd is out of file descriptors; try again later"))
            _ = refusal.encoded().withUnsafeBytes { Client.send(fd, $0.baseAddress, $0.count) }
            close(fd)
        }
        spareFD = open("/dev/null", O_RDONLY | O_CLOEXEC)
        return fd >= 0
    }

    /// Logs accept failures at most once a second, with how many there were.
    private func noteAcceptFailure(_ e: Int32) {
        acceptFailures += 1
        let now = monotonicNow()
        if now &- lastAcceptLogNs >= 1_000_000_000 {
            logger.error("accept failed: \(errnoText(e))\(acceptFailures > 1 ? " (\(acceptFailures) times in the last second)" : "")\(e == EMFILE || e == ENFILE ? ": raise LimitNOFILE or lower --max-clients" : "")")
            lastAcceptLogNs = now
            acceptFailures = 0
        }
    }

    private func acceptClients() {
        for _ in 0..<64 {
            let fd = accept(listener.fd, nil, nil)
            if fd < 0 {
                let e = errno
                if e == EAGAIN || e == EWOULDBLOCK { return }
                if e == EINTR || e == ECONNABORTED { continue }
                noteAcceptFailure(e)
                if (e == EMFILE || e == ENFILE), refuseWithSpareDescriptor() { continue }
                // Could not even refuse: stop watching the socket for a moment rather than spin.
                unregister(listener.fd)
                listenerPausedUntilNs = monotonicNow() + 100_000_000
                updateHousekeeping()
                return
            }
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            var cred = (pid: Int32(0), uid: UInt32(0), gid: UInt32(0))  // struct ucred
            var len = socklen_t(MemoryLayout.size(ofValue: cred))
            _ = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len)
            if clients.count >= configuration.maxClients {
                logger.warning("client pid \(cred.pid) uid \(cred.uid) refused: at the cap of \(configuration.maxClients) clients (--max-clients)")
                let refusal = ServerMessage.refused(Refusal(
                    code: .tooManyClients,
                    message: "vsyncd serves at most \(configuration.maxClients) clients; try again later"))
                _ = refusal.encoded().withUnsafeBytes { Client.send(fd, $0.baseAddress, $0.count) }
                close(fd)
                continue
            }
            var size = Self.clientSendBuffer
            _ = setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<Int32>.size))
            let client = Client(fd: fd, pid: cred.pid, uid: cred.uid)
            do {
                try register(fd, .client)
            } catch {
                logger.error("\(error)")
                close(fd)
                continue
            }
            clients[fd] = client
            statusDirty = true
            logger.info("client connected: pid \(cred.pid) uid \(cred.uid) (\(clients.count) client(s))")
        }
    }

    private func handleClient(_ client: Client, events: UInt32) {
        if events & Epoll.writable != 0 { flush(client) }
        if client.closeReason == nil, events & Epoll.readable != 0 { readRequests(client) }
        if client.closeReason == nil, events & (Epoll.hangUp | Epoll.error) != 0,
           events & Epoll.readable == 0 {
            disconnect(client, reason: "connection closed", level: .info)
        }
    }

    private func readRequests(_ client: Client) {
        // A bounded batch per wake-up, so one chatty client cannot starve the others.
        for _ in 0..<32 {
            let n = recv(client.fd, receiveBuffer.baseAddress, receiveBuffer.count, Int32(MSG_DONTWAIT) | Int32(MSG_TRUNC))
            if n == 0 { disconnect(client, reason: "closed by client", level: .info); return }
            if n < 0 {
                let e = errno
                if e == EAGAIN || e == EWOULDBLOCK { return }
                if e == EINTR { continue }
                disconnect(client, reason: "recv failed: \(errnoText(e))", level: .info)
                return
            }
            let bytes = UnsafeRawBufferPointer(rebasing: receiveBuffer[0..<min(n, receiveBuffer.count)])
            let result: Result<ClientMessage, WireError>
            do throws(WireError) {
                result = .success(try ClientMessage.decode(bytes))
            } catch {
                result = .failure(n > receiveBuffer.count ? .oversized(n) : error)
            }
            handle(result, from: client)
            if client.closeReason != nil { return }
        }
    }

    /// Sends a last message (best effort) and disconnects.
    private func fail(_ client: Client, _ message: ServerMessage, reason: String) {
        let bytes = message.encoded()
        _ = bytes.withUnsafeBytes { Client.send(client.fd, $0.baseAddress, $0.count) }
        disconnect(client, reason: reason, level: .warning)
    }

    private func handle(_ result: Result<ClientMessage, WireError>, from client: Client) {
        guard client.version != nil else {
            switch result {
            case .success(.hello(let hello)): handshake(client, hello)
            case .success(let other):
                fail(client, .error(ErrorMessage(code: .notHandshaken, message: "send HELLO first (got \(other.type) before the handshake)")),
                     reason: "request \(other.type) before the handshake")
            case .failure(let e):
                fail(client, .refused(Refusal(code: .badHandshake, message: "the first message must be a HELLO: \(e)")),
                     reason: "bad handshake: \(e)")
            }
            return
        }
        switch result {
        case .failure(.unknownType(let t)):
            fail(client, .error(ErrorMessage(code: .unknownType, message: "unknown request type 0x\(String(t, radix: 16))")),
                 reason: "unknown request type 0x\(String(t, radix: 16))")
        case .failure(let e):
            fail(client, .error(ErrorMessage(code: .malformed, message: "\(e)")), reason: "malformed request: \(e)")
        case .success(let message):
            handle(message, from: client)
        }
    }

    private func handshake(_ client: Client, _ hello: Hello) {
        client.name = hello.clientName
        let low = max(hello.minVersion, WireProtocol.minimumVersion)
        let high = min(hello.maxVersion, WireProtocol.currentVersion)
        guard hello.minVersion <= hello.maxVersion, low <= high else {
            let text = "client speaks protocol \(hello.minVersion)–\(hello.maxVersion), vsyncd speaks \(WireProtocol.minimumVersion)–\(WireProtocol.currentVersion): update the \(hello.maxVersion < WireProtocol.minimumVersion ? "client library" : "daemon")"
            fail(client, .refused(Refusal(code: .versionUnsupported, message: text)), reason: "refused: \(text)")
            return
        }
        client.version = high
        logger.debug("client \(client.label): protocol \(high)")
        send(ServerMessage.welcome(Welcome(
            version: high, serverFlags: source.isSynthetic ? .syntheticSource : [], serverPID: UInt32(getpid()))).encoded(), to: client)
    }

    private func handle(_ message: ClientMessage, from client: Client) {
        switch message {
        case .hello:
            fail(client, .error(ErrorMessage(code: .malformed, message: "second HELLO")), reason: "second HELLO")
        case .listDisplays:
            rescanIfStale()
            send(ServerMessage.displayList(displays.map(info)).encoded(), to: client)
        case .subscribe(let request):
            subscribe(client, request)
        case .setRate(let request):
            guard let sub = client.subscriptions[request.subscriptionID] else { return unknown(client, request.subscriptionID) }
            sub.range = request.range
            sub.divisor = RateMapping.divisor(for: request.range, refreshHz: sub.display.refreshHz)
            sub.resetDelivery()
            client.pendingTicks.removeAll { $0 === sub }
            settle(client)
            send(subscribed(sub).encoded(), to: client)
        case .pause(let id):
            guard let sub = client.subscriptions[id] else { return unknown(client, id) }
            sub.paused = true
            sub.resetDelivery()
            client.pendingTicks.removeAll { $0 === sub }
            settle(client)
            updateVBlank(sub.display)
        case .resume(let id):
            guard let sub = client.subscriptions[id] else { return unknown(client, id) }
            if sub.paused {
                sub.paused = false
                sub.resetDelivery()
                updateVBlank(sub.display)
            }
        case .unsubscribe(let id):
            guard let sub = client.subscriptions[id] else { return unknown(client, id) }
            remove(sub)
        }
    }

    private func unknown(_ client: Client, _ id: UInt32) {
        send(ServerMessage.error(ErrorMessage(code: .unknownSubscription, subscriptionID: id, message: "no subscription \(id)")).encoded(), to: client)
    }

    private func resolve(_ selector: DisplaySelector) -> Display? {
        switch selector {
        case .primary: displays.first { $0.id == primaryID }
        case .crtc(let id): displays.first { $0.key.crtcID == id }
        case .connector(let name): displays.first { $0.source.connectorName == name }
        case .display(let id): displays.first { $0.id == id }
        }
    }

    private func subscribe(_ client: Client, _ request: Subscribe) {
        let id = request.subscriptionID
        guard id != 0 else {
            fail(client, .error(ErrorMessage(code: .malformed, message: "subscription id 0 is reserved")), reason: "subscription id 0")
            return
        }
        if client.subscriptions[id] != nil {
            send(ServerMessage.error(ErrorMessage(code: .duplicateSubscription, subscriptionID: id, message: "subscription \(id) already exists")).encoded(), to: client)
            return
        }
        guard client.subscriptions.count < configuration.maxSubscriptionsPerClient else {
            send(ServerMessage.error(ErrorMessage(code: .tooManySubscriptions, subscriptionID: id, message: "at most \(configuration.maxSubscriptionsPerClient) subscriptions per client")).encoded(), to: client)
            return
        }
        if resolve(request.selector) == nil { rescanIfStale() }
        guard let d = resolve(request.selector) else {
            let names = displays.map(\.source.connectorName).joined(separator: ", ")
            send(ServerMessage.error(ErrorMessage(code: .unknownDisplay, subscriptionID: id, message: "no display matches \(request.selector); displays: \(names.isEmpty ? "none" : names)")).encoded(), to: client)
            return
        }
        let sub = Subscription(
            id: id, client: client, display: d, range: request.range,
            divisor: RateMapping.divisor(for: request.range, refreshHz: d.refreshHz),
            paused: request.flags.contains(.startPaused))
        client.subscriptions[id] = sub
        d.subscriptions.append(sub)
        logger.debug("client \(client.label): subscription \(id) on display \(d.id) at divisor \(sub.divisor)\(sub.paused ? ", paused" : "")")
        updateVBlank(d)  // first, so vblanks are requested by the time the client hears back
        send(subscribed(sub).encoded(), to: client)
    }

    private func remove(_ sub: Subscription) {
        sub.client.subscriptions[sub.id] = nil
        sub.client.pendingTicks.removeAll { $0 === sub }
        settle(sub.client)
        let d = sub.display
        d.subscriptions.removeAll { $0 === sub }
        updateVBlank(d)
    }

    private func disconnect(_ client: Client, reason: String, level: Logger.Level) {
        guard client.closeReason == nil else { return }
        client.closeReason = reason
        let touched = Set(client.subscriptions.values.map { ObjectIdentifier($0.display) })
        for sub in client.subscriptions.values { sub.display.subscriptions.removeAll { $0 === sub } }
        client.subscriptions = [:]
        client.pendingTicks = []
        unregister(client.fd)
        close(client.fd)
        clients[client.fd] = nil
        statusDirty = true
        logger.log(level: level, "client disconnected: \(client.label): \(reason) (\(clients.count) client(s))")
        for d in displays where touched.contains(ObjectIdentifier(d)) { updateVBlank(d) }
        updateHousekeeping()
    }
}
