internal import CVsyncSys

#if !VSYNC_EMBEDDED
    import VsyncCore
#endif

// Reading: every datagram waiting, control messages in order, then the newest tick of each
// subscription.
extension VsyncClient {
    /// Reads everything waiting on the socket; returns the frames added to the events. With
    /// `waiting`, first waits in the read itself for a datagram (the steady state's one syscall).
    func drain(waiting: Bool = false) -> Int {
        let size = WireProtocol.maxMessageSize
        var closed = false
        var wait: Int32 = waiting ? 1 : 0
        var resetSeen = false
        reading: while socketFD >= 0 {
            let fd = socketFD
            let count = vsync_sys_recv_batch(
                fd, buffers.baseAddress!.assumingMemoryBound(to: UInt8.self), size,
                Int32(Self.batch), lengths.baseAddress, receivedFDs.baseAddress, wait)
            wait = 0
            if count < 0 {
                // A reset is reported once, ahead of what is still queued: read on for the
                // daemon's last word (a REFUSED or an ERROR sent just before it closed).
                if -count == ECONNRESET && !resetSeen {
                    resetSeen = true
                    closed = true
                    continue
                }
                // Nothing waiting, or a signal ended the wait: neither is the connection's fault.
                if -count != EAGAIN && -count != EWOULDBLOCK && -count != EINTR { closed = true }
                break
            }
            if count == 0 {
                closed = true
                break
            }
            let received = vsync_sys_now_ns()
            for i in 0..<Int(count) {
                let length = Int(lengths[i])
                if length == 0 {
                    closed = true
                    closeReceivedFDs(from: i)
                    break reading
                }
                let carried = receivedFDs[i]
                receivedFDs[i] = -1
                handleDatagram(at: i * size, length: length, received: received, fd: carried)
                if socketFD < 0 {
                    closeReceivedFDs(from: i + 1)
                    break reading
                }
            }
            // Fewer than a full batch: the socket was empty when read, so no second call.
            if count < Int32(Self.batch) { break }
        }
        let frames = deliverTicks()
        if closed && socketFD >= 0 {
            let wasReady = ready
            hangUp()
            if wasReady {
                // The daemon stopped or restarted: retry almost at once.
                report(.connectionLost(socketPath: socketPath))
                backoff = configuration.initialBackoffNs
            } else {
                report(.connectionFailed(socketPath: socketPath, errno: ECONNRESET))
            }
            scheduleRetry(now: vsync_sys_now_ns())
        }
        return frames
    }

    /// Closes the descriptors of datagrams read but not handled (the connection ended first).
    private func closeReceivedFDs(from index: Int) {
        for j in index..<Self.batch where receivedFDs[j] >= 0 {
            _ = vsync_sys_close(receivedFDs[j])
            receivedFDs[j] = -1
        }
    }

    /// Handles one datagram; owns `fd` (what it carried, or -1): only TIMING_PAGE keeps one,
    /// every other is closed unread (docs/PROTOCOL.md § 5).
    private func handleDatagram(at offset: Int, length: Int, received: UInt64, fd: Int32) {
        var fd = fd
        defer { if fd >= 0 { _ = vsync_sys_close(fd) } }
        // A length past the buffer is a cut datagram (its true size is unknown): too long for the protocol.
        guard length <= WireProtocol.maxMessageSize else {
            report(.protocolViolation("a datagram over \(WireProtocol.maxMessageSize) bytes, the protocol's maximum"))
            return
        }
        // The tick path: a TICK goes straight to its subscription's newest-tick slot, without the
        // ServerMessage enum and its copies. While the page's answer is awaited, everything takes
        // the general path, which settles that.
        if !awaitingPage {
            var failure: WireError?
            let handled: Bool
            do throws(WireError) {
                let bytes = UnsafeRawBufferPointer(rebasing: buffers[offset..<(offset + length)])
                if let tick = try ServerMessage.decodeTick(bytes) {
                    coalesce(tick, received: received)
                    handled = true
                } else {
                    handled = false
                }
            } catch {
                failure = error
                handled = true
            }
            if let failure { report(.protocolViolation(failure.description)) }
            if handled { return }
        }
        let decoded: Result<ServerMessage?, WireError>
        do throws(WireError) {
            decoded = .success(try ServerMessage.decode(UnsafeRawBufferPointer(rebasing: buffers[offset..<(offset + length)])))
        } catch {
            decoded = .failure(error)
        }
        let message: ServerMessage?
        switch decoded {
        case .success(let m): message = m
        case .failure(let error):
            report(.protocolViolation(error.description))
            return
        }
        guard let message else { return }  // a newer daemon's message type: ignore
        afterWelcome(message)
        if case .tick(let tick) = message {
            coalesce(tick, received: received)
        } else if case .timingPage(let page) = message {
            receivedTimingPage(page, fd: fd)
            fd = -1
        } else {
            handle(message, now: received)
        }
    }

    /// Keeps the newest tick per subscription; the replaced ones count as skipped.
    private func coalesce(_ tick: Tick, received: UInt64) {
        guard let at = subscriptions.index(of: tick.subscriptionID), !subscriptions[at: at].paused else { return }
        // The tick's divisor and interval take effect where it stands in the stream: a SUBSCRIBED
        // or display event read after it in the same read (a mode change) is newer and stays.
        subscriptions[at: at].divisor = tick.divisor
        subscriptions[at: at].displayIntervalNs = tick.displayIntervalNs
        for i in pendingTicks.indices where pendingTicks[i].tick.subscriptionID == tick.subscriptionID {
            pendingTicks[i].replaced &+= pendingTicks[i].tick.skipped &+ 1
            pendingTicks[i].tick = tick
            pendingTicks[i].received = received
            return
        }
        pendingTicks.append((tick, 0, received))
    }

    private func deliverTicks() -> Int {
        guard !pendingTicks.isEmpty else { return 0 }
        var frames = 0
        for pending in pendingTicks {
            let id = pending.tick.subscriptionID
            guard let at = subscriptions.index(of: id), !subscriptions[at: at].paused else { continue }
            events.append(.frame(ClientFrame(pending.tick, replaced: pending.replaced, receivedNs: pending.received)))
            frames += 1
        }
        pendingTicks.removeAll(keepingCapacity: true)
        return frames
    }

    private func handle(_ message: ServerMessage, now: UInt64) {
        switch message {
        case .welcome(let welcome):
            ready = true
            welcomeMessage = welcome
            backoff = configuration.initialBackoffNs
            outbox.removeAll()
            unsentSubscriptions.removeAll()  // all sent just below
            reportedErrors.removeAll()
            lastError = nil
            welcomed(version: welcome.version)
            for id in subscriptions.keys {
                subscriptions[id]?.active = true
                if let info = subscriptions[id] { outbox.append(subscribeMessage(id, info)) }
            }
            events.append(.connected(welcome))
        case .refused(let refusal):
            fail(.refused(reason: refusal.message), now: now)
            // No common version: the daemon will not change its mind within seconds.
            if refusal.code == .versionUnsupported { retryAt &+= 4 &* configuration.maximumBackoffNs }
        case .subscribed(let answer):
            guard var info = subscriptions[answer.subscriptionID] else { return }
            info.display = answer.display
            info.divisor = answer.divisor
            info.displayIntervalNs = answer.displayIntervalNs
            subscriptions[answer.subscriptionID] = info
            events.append(.subscribed(answer))
        case .displayEvent(let event):
            handle(event)
        case .error(let error):
            handle(error)
        case .timingPage:
            break  // handled with its descriptor in handleDatagram
        case .displayList(let displays):
            lastDisplayList = displays
            displayListsReceived += 1
        case .tick:
            break
        }
    }

    private func handle(_ event: DisplayEvent) {
        let displayID = event.display.displayID
        switch event.kind {
        case .added:
            // Subscriptions whose display was missing get another chance.
            for id in subscriptions.keys where subscriptions[id]?.active == false {
                subscriptions[id]?.active = true
                reportedErrors[id] = nil
                if ready, let info = subscriptions[id] { outbox.append(subscribeMessage(id, info)) }
            }
            events.append(.display(subscriptionID: 0, event))
        case .removed:
            for id in subscriptions.keys {
                guard let info = subscriptions[id], info.active, info.display?.displayID == displayID else { continue }
                // Protocol 3: a subscription by name or primary waits for its display to come
                // back (a waiting SUBSCRIBED follows); only ids name what is gone for good.
                if (welcomeMessage?.version ?? 1) >= 3 && info.selector.canAppearLater {
                    events.append(.display(subscriptionID: id, event))
                    continue
                }
                subscriptions[id]?.active = false
                if ready { outbox.append(.unsubscribe(subscriptionID: id)) }
                let error = ClientError.displayGone(name: event.display.connectorName)
                lastError = error
                events.append(.error(subscriptionID: id, error))
            }
        case .modeChanged, .off, .on, .variableRefreshChanged:
            for id in subscriptions.keys {
                guard var info = subscriptions[id], info.display?.displayID == displayID else { continue }
                if event.kind != .off { info.display = event.display }
                if event.display.periodNs > 0 && event.kind != .off { info.displayIntervalNs = event.display.periodNs }
                subscriptions[id] = info
                events.append(.display(subscriptionID: id, event))
            }
        }
    }

    private func handle(_ error: ErrorMessage) {
        if error.subscriptionID == 0 {
            // Codes 1–3 mean this library sent something wrong; the daemon hangs up next.
            let failure = ClientError.requestFailed(code: error.code.rawValue, reason: error.message)
            lastError = failure
            if subscriptions.isEmpty { events.append(.error(subscriptionID: 0, failure)) }
            for id in subscriptions.keys { events.append(.error(subscriptionID: id, failure)) }
            return
        }
        let id = error.subscriptionID
        guard let info = subscriptions[id] else { return }
        let failure: ClientError
        switch error.code {
        case .unknownSubscription:
            return  // a request raced an unsubscribe or a display removal
        case .unknownDisplay:
            subscriptions[id]?.active = false
            failure = .displayNotFound(selector: info.selector.displayName, reason: error.message)
        default:
            failure = .requestFailed(code: error.code.rawValue, reason: error.message)
        }
        lastError = failure
        events.append(.error(subscriptionID: id, failure))
    }
}
