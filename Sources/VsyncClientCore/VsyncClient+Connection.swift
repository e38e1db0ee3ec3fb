internal import CVsyncSys

#if !VSYNC_EMBEDDED
    import VsyncCore
#endif

// The connection's life: connecting, the handshake deadline, sending, hanging up and retrying.
extension VsyncClient {
    /// Does what is due at `now` without waiting; returns the frames it added to the events.
    @discardableResult
    func process(now: UInt64) -> Int {
        if subscriptions.isEmpty, socketFD >= 0, let idle = idleSince, now &- idle >= configuration.idleCloseNs {
            hangUp()
            idleSince = nil
            backoff = configuration.initialBackoffNs
            retryAt = 0
        }
        if !subscriptions.isEmpty && socketFD < 0 && now >= retryAt {
            openSocket(now: now)
        }
        var frames = 0
        if socketFD >= 0 { frames = drain() }
        frames += pagePace(now: now)
        finish(now: now)
        return frames
    }

    /// After a read: sends what it queued (renewed subscriptions, say), checks the handshake
    /// deadline and arms the timer for the next one.
    func finish(now: UInt64) {
        if ready && !unsentSubscriptions.isEmpty {
            for id in unsentSubscriptions { if let info = subscriptions[id] { outbox.append(subscribeMessage(id, info)) } }
            unsentSubscriptions.removeAll()
        }
        if socketFD >= 0 && ready && !outbox.isEmpty { flush(now: now) }
        if socketFD >= 0 && !ready && now >= handshakeDeadline {
            fail(.connectionFailed(socketPath: socketPath, errno: ETIMEDOUT), now: now)
        }
        updateTimer(now: now)
    }

    /// Connects and sends HELLO; on failure reports it and schedules a retry.
    func openSocket(now: UInt64) {
        let fd = configuration.connector.open(socketPath)
        guard fd >= 0 else {
            // A full listen backlog is not worth telling the app about: just retry.
            if -fd != EAGAIN { report(.forErrno(-fd, path: socketPath)) }
            scheduleRetry(now: now)
            return
        }
        socketFD = fd
        // Waiting in the read itself needs a read that signals end (else epoll_wait first).
        socketBlocks = vsync_sys_is_blocking(fd) != 0 && vsync_sys_set_interruptible(fd) == 0
        ready = false
        wantWrite = false
        handshakeDeadline = now &+ configuration.handshakeTimeoutNs
        let rc = vsync_sys_epoll_ctl(epollFD, EPOLL_CTL_ADD, fd, EPOLLIN.rawValue)
        guard rc == 0 else {
            fail(.connectionFailed(socketPath: socketPath, errno: -rc), now: now)
            return
        }
        let hello = ClientMessage.hello(
            Hello(
                minVersion: WireProtocol.minimumVersion, maxVersion: WireProtocol.currentVersion,
                clientName: configuration.clientName))
        let sent = hello.encoded().withUnsafeBytes { vsync_sys_send(fd, $0.baseAddress, $0.count) }
        guard sent < 0 else { return }
        if -sent == EPIPE || -sent == ECONNRESET {
            // A full daemon refuses at accept, sends REFUSED and closes before HELLO arrives:
            // read that reason rather than report a bare broken pipe.
            _ = drain()
            if socketFD < 0 { return }
        }
        fail(.forErrno(Int32(-sent), path: socketPath), now: now)
    }

    /// Closes the socket; the subscriptions stay and are renewed on the next connection.
    func hangUp() {
        guard socketFD >= 0 else { return }
        _ = vsync_sys_epoll_ctl(epollFD, EPOLL_CTL_DEL, socketFD, 0)
        _ = vsync_sys_close(socketFD)
        socketFD = -1
        ready = false
        awaitingPage = false
        wantWrite = false
        outbox.removeAll()
        unsentSubscriptions.removeAll()  // the next handshake renews every subscription
        displayListsRequested = 0
        displayListsReceived = 0
        pendingTicks.removeAll(keepingCapacity: true)
    }

    func fail(_ error: ClientError, now: UInt64) {
        hangUp()
        report(error)
        scheduleRetry(now: now)
    }

    func scheduleRetry(now: UInt64) {
        retryAt = now &+ backoff
        backoff = min(backoff &* 2, configuration.maximumBackoffNs)
    }

    /// Tells every subscription about a connection-level `error`, once each until the next
    /// successful handshake (a retry loop must not repeat it on every attempt).
    func report(_ error: ClientError) {
        lastError = error
        if subscriptions.isEmpty {
            if reportedErrors[0] != error {
                reportedErrors[0] = error
                events.append(.error(subscriptionID: 0, error))
            }
            return
        }
        for id in subscriptions.keys where reportedErrors[id] != error {
            reportedErrors[id] = error
            events.append(.error(subscriptionID: id, error))
        }
    }

    /// Sends `message` now, or queues it behind what a full socket did not take.
    func send(_ message: ClientMessage) {
        guard socketFD >= 0 else { return }
        outbox.append(message)
        if !wantWrite { flush(now: vsync_sys_now_ns()) }
    }

    /// Sends the outbox in order; what a full socket does not take waits for EPOLLOUT.
    func flush(now: UInt64) {
        var sent = 0
        defer { outbox.removeFirst(sent) }
        for message in outbox {
            guard socketFD >= 0 else { return }
            let n = message.encoded().withUnsafeBytes { vsync_sys_send(socketFD, $0.baseAddress, $0.count) }
            if n >= 0 {
                sent += 1
                continue
            }
            let err = Int32(-n)
            if err == EAGAIN || err == EWOULDBLOCK {
                setWantWrite(true)
                return
            }
            sent = 0  // fail() empties the outbox
            fail(
                err == EPIPE || err == ECONNRESET ? .connectionLost(socketPath: socketPath) : .forErrno(err, path: socketPath),
                now: now)
            return
        }
        setWantWrite(false)
    }

    func setWantWrite(_ want: Bool) {
        guard want != wantWrite, socketFD >= 0 else { return }
        wantWrite = want
        let events = want ? EPOLLIN.rawValue | EPOLLOUT.rawValue : EPOLLIN.rawValue
        _ = vsync_sys_epoll_ctl(epollFD, EPOLL_CTL_MOD, socketFD, events)
    }

    /// Arms the timerfd for the next deadline: a retry, the handshake, or the idle close. In
    /// the steady state (connected, subscribed) there is none and this makes no syscall.
    func updateTimer(now: UInt64) {
        var deadline: UInt64 = 0
        if socketFD < 0 {
            if !subscriptions.isEmpty { deadline = max(retryAt, 1) }
        } else if !ready {
            deadline = handshakeDeadline
        } else if !unsentSubscriptions.isEmpty {
            deadline = 1  // already past: readable now, so the loop dispatches and it is sent
        }
        let page = pageWakeNs
        if page != 0 { deadline = deadline == 0 ? page : min(deadline, page) }
        if socketFD >= 0, subscriptions.isEmpty, let idle = idleSince {
            let close = idle &+ configuration.idleCloseNs
            deadline = deadline == 0 ? close : min(deadline, close)
        }
        // Re-arming also clears an expiry already past, which would otherwise keep the fd readable.
        if deadline != armedDeadline || (armedDeadline != 0 && now >= armedDeadline) {
            _ = vsync_sys_timerfd_set(timerFD, deadline)
            armedDeadline = deadline
        }
    }
}
