import CLinux
import Glibc
import Logging
import VsyncCore

// Accepting clients, reading and answering their requests, disconnecting them.
extension Server {
    /// Answers one waiting connection with a refusal when out of file descriptors: the spare
    /// descriptor is freed for the accept and taken back after. Without this the listening socket
    /// stays readable and the loop would spin on EMFILE.
    func refuseWithSpareDescriptor() -> Bool {
        guard spare != nil else { return false }
        spare = nil
        let accepted = try? nonBlocking("accept") { accept(listener.fd.raw, nil, nil) }
        if let accepted {
            let fd = FileDescriptor(accepted)
            let refusal = ServerMessage.refused(Refusal(
                code: .tooManyClients, message: "vsyncd is out of file descriptors; try again later"))
            _ = refusal.encoded().withUnsafeBytes { Client.send(fd.raw, $0.baseAddress, $0.count) }
        }
        spare = FileDescriptor(opening: "/dev/null", O_RDONLY)
        return accepted != nil
    }

    /// Logs accept failures at most once a second, with how many there were.
    func noteAcceptFailure(_ e: Int32) {
        acceptFailures += 1
        let now = monotonicNow()
        if now &- lastAcceptLogNs >= 1_000_000_000 {
            logger.error("accept failed: \(errnoText(e))\(acceptFailures > 1 ? " (\(acceptFailures) times in the last second)" : "")\(e == EMFILE || e == ENFILE ? ": raise LimitNOFILE or lower --max-clients" : "")")
            lastAcceptLogNs = now
            acceptFailures = 0
        }
    }

    /// Sends REFUSED tooManyClients and closes. Logged at most once a second with a count, so a
    /// flood of connections cannot flood the log.
    func refuse(_ fd: consuming FileDescriptor, pid: Int32, uid: UInt32, _ message: String, log: String) {
        // Logged before the client can see the refusal, so the log never lags what it saw.
        refusalsSinceLog += 1
        let now = monotonicNow()
        if now &- lastRefusalLogNs >= 1_000_000_000 {
            let more = refusalsSinceLog > 1 ? " (\(refusalsSinceLog) refusals in the last second)" : ""
            logger.warning("client pid \(pid) uid \(uid) refused: \(log)\(more)")
            lastRefusalLogNs = now
            refusalsSinceLog = 0
        }
        let refusal = ServerMessage.refused(Refusal(code: .tooManyClients, message: message))
        _ = refusal.encoded().withUnsafeBytes { Client.send(fd.raw, $0.baseAddress, $0.count) }
    }

    func acceptClients() {
        for _ in 0..<64 {
            let accepted: Int32?
            do throws(SystemCallError) {
                accepted = try nonBlocking("accept") { accept(listener.fd.raw, nil, nil) }
            } catch where error.code == ECONNABORTED {
                continue
            } catch {
                noteAcceptFailure(error.code)
                if error.code == EMFILE || error.code == ENFILE, refuseWithSpareDescriptor() { continue }
                // Could not even refuse: stop watching the socket for a moment rather than spin.
                unregister(listener.fd.raw)
                listenerPausedUntilNs = monotonicNow() + 100_000_000
                updateHousekeeping()
                return
            }
            guard let accepted else { return }
            let fd = FileDescriptor(accepted)
            _ = fcntl(fd.raw, F_SETFL, fcntl(fd.raw, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd.raw, F_SETFD, FD_CLOEXEC)
            var cred = (pid: Int32(0), uid: UInt32(0), gid: UInt32(0))  // struct ucred
            var len = socklen_t(MemoryLayout.size(ofValue: cred))
            _ = getsockopt(fd.raw, SOL_SOCKET, SO_PEERCRED, &cred, &len)
            if clients.count >= configuration.maxClients {
                refuse(fd, pid: cred.pid, uid: cred.uid,
                       "vsyncd serves at most \(configuration.maxClients) clients; try again later",
                       log: "at the cap of \(configuration.maxClients) clients (--max-clients)")
                continue
            }
            // Counted on demand: accepts are rare next to ticks, and nothing can drift.
            let held = clients.values.reduce(0) { $0 + ($1.uid == cred.uid ? 1 : 0) }
            if held >= configuration.maxClientsPerUser {
                refuse(fd, pid: cred.pid, uid: cred.uid,
                       "uid \(cred.uid) already has \(held) connections, the per-user limit: close some, or raise vsyncd's --max-clients-per-user",
                       log: "uid \(cred.uid) is at the per-user cap of \(configuration.maxClientsPerUser) connections (--max-clients-per-user)")
                continue
            }
            var size = Self.clientSendBuffer
            _ = setsockopt(fd.raw, SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<Int32>.size))
            let client = Client(socket: fd, pid: cred.pid, uid: cred.uid)
            do {
                try register(client.fd, .client)
            } catch {
                logger.error("\(error)")
                continue
            }
            clients[client.fd] = client
            statusDirty = true
            logger.info("client connected: pid \(cred.pid) uid \(cred.uid) (\(clients.count) client(s))")
        }
    }

    func handleClient(_ client: Client, events: UInt32) {
        if events & Epoll.writable != 0 { flush(client) }
        if client.closeReason == nil, events & Epoll.readable != 0 { readRequests(client) }
        if client.closeReason == nil, events & (Epoll.hangUp | Epoll.error) != 0,
           events & Epoll.readable == 0 {
            disconnect(client, reason: "connection closed", level: .info)
        }
    }

    func readRequests(_ client: Client) {
        // A bounded batch per wake-up, so one chatty client cannot starve the others.
        for _ in 0..<32 {
            let received: Int?
            do throws(SystemCallError) {
                received = try nonBlocking("recv") { () -> Int in
                    recv(client.fd, receiveBuffer.baseAddress, receiveBuffer.count, Int32(MSG_DONTWAIT) | Int32(MSG_TRUNC))
                }
            } catch {
                return disconnect(client, reason: "recv failed: \(errnoText(error.code))", level: .info)
            }
            guard let n = received else { return }
            if n == 0 { disconnect(client, reason: "closed by client", level: .info); return }
            let bytes = UnsafeRawBufferPointer(rebasing: receiveBuffer[0..<min(n, receiveBuffer.count)])
            let result: Result<ClientMessage, WireError>
            do throws(WireError) {
                result = .success(try ClientMessage.decode(bytes, version: client.version ?? WireProtocol.currentVersion))
            } catch {
                result = .failure(n > receiveBuffer.count ? .oversized(n) : error)
            }
            handle(result, from: client)
            if client.closeReason != nil { return }
        }
    }

    /// Sends a last message (best effort) and disconnects.
    func fail(_ client: Client, _ message: ServerMessage, reason: String) {
        let bytes = message.encoded()
        _ = bytes.withUnsafeBytes { Client.send(client.fd, $0.baseAddress, $0.count) }
        disconnect(client, reason: reason, level: .warning)
    }

    func handle(_ result: Result<ClientMessage, WireError>, from client: Client) {
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
        case .failure(.badSelector(let id, let problem)):
            refuseSelector(client, id: id, problem)
        case .failure(let e):
            fail(client, .error(ErrorMessage(code: .malformed, message: "\(e)")), reason: "malformed request: \(e)")
        case .success(let message):
            handle(message, from: client)
        }
    }

    func handshake(_ client: Client, _ hello: Hello) {
        client.name = hello.clientName
        let low = max(hello.minVersion, WireProtocol.minimumVersion)
        let high = min(hello.maxVersion, WireProtocol.currentVersion)
        guard hello.minVersion <= hello.maxVersion, low <= high else {
            let text = "client speaks protocol \(hello.minVersion)–\(hello.maxVersion), vsyncd speaks \(WireProtocol.minimumVersion)–\(WireProtocol.currentVersion): update the \(hello.maxVersion < WireProtocol.minimumVersion ? "client library" : "daemon")"
            fail(client, .refused(Refusal(code: .versionUnsupported, message: text)), reason: "refused: \(text)")
            return
        }
        client.handshaken(version: high)
        logger.debug("client \(client.label): protocol \(high)")
        send(ServerMessage.welcome(Welcome(
            version: high, serverFlags: source.isSynthetic ? .syntheticSource : [], serverPID: UInt32(getpid()))), to: client)
        if client.features.contains(.timingPage) { sendTimingPage(to: client) }
    }

    func handle(_ message: ClientMessage, from client: Client) {
        switch message {
        case .hello:
            fail(client, .error(ErrorMessage(code: .malformed, message: "second HELLO")), reason: "second HELLO")
        case .listDisplays:
            refreshDisplays()
            send(ServerMessage.displayList(displays.map(info)), to: client)
        case .subscribe(let request):
            subscribe(client, request)
        case .setRate(let request):
            if client.waiting[request.subscriptionID] != nil {
                client.waiting[request.subscriptionID]?.range = request.range
                return send(waitingAnswer(request.subscriptionID), to: client)
            }
            guard let sub = client.subscriptions[request.subscriptionID] else { return unknown(client, request.subscriptionID) }
            sub.range = request.range
            sub.divisor = RateMapping.divisor(for: request.range, refreshHz: sub.display.refreshHz)
            sub.resetDelivery()
            settle(client)
            updatePacing(sub.display)
            send(subscribed(sub), to: client)
        case .setWorkDuration(let request):
            guard client.features.contains(.workDurations) else {
                return fail(client, .error(ErrorMessage(code: .unknownType, message: "SET_WORK_DURATION needs protocol 2")), reason: "SET_WORK_DURATION at protocol 1")
            }
            if client.waiting[request.subscriptionID] != nil {
                client.waiting[request.subscriptionID]?.workDurationNs = request.workDurationNs
                return send(waitingAnswer(request.subscriptionID), to: client)
            }
            guard let sub = client.subscriptions[request.subscriptionID] else { return unknown(client, request.subscriptionID) }
            if sub.workDurationNs != request.workDurationNs {
                // The pacer aims afresh, after the last frame it handed out.
                sub.workDurationNs = request.workDurationNs
                if sub.workDurationNs == 0 { sub.lastDueSequence = nil }
                updatePacing(sub.display)
            }
            send(subscribed(sub), to: client)
        case .pause(let id):
            if client.waiting[id] != nil { client.waiting[id]?.flags.insert(.startPaused); return }
            guard let sub = client.subscriptions[id] else { return unknown(client, id) }
            sub.paused = true
            sub.resetDelivery()
            settle(client)
            updateVBlank(sub.display)
        case .resume(let id):
            if client.waiting[id] != nil { client.waiting[id]?.flags.remove(.startPaused); return }
            guard let sub = client.subscriptions[id] else { return unknown(client, id) }
            if sub.paused {
                sub.paused = false
                sub.resetDelivery()
                updateVBlank(sub.display)
            }
        case .unsubscribe(let id):
            if client.waiting.removeValue(forKey: id) != nil { return updateHousekeeping() }
            guard let sub = client.subscriptions[id] else { return unknown(client, id) }
            remove(sub)
        }
    }

    func unknown(_ client: Client, _ id: UInt32) {
        send(ServerMessage.error(ErrorMessage(code: .unknownSubscription, subscriptionID: id, message: "no subscription \(id)")), to: client)
    }

    func subscribe(_ client: Client, _ request: Subscribe) {
        let id = request.subscriptionID
        guard id != 0 else {
            fail(client, .error(ErrorMessage(code: .malformed, message: "subscription id 0 is reserved")), reason: "subscription id 0")
            return
        }
        if client.subscriptions[id] != nil || client.waiting[id] != nil {
            send(ServerMessage.error(ErrorMessage(code: .duplicateSubscription, subscriptionID: id, message: "subscription \(id) already exists")), to: client)
            return
        }
        guard client.subscriptions.count + client.waiting.count < configuration.maxSubscriptionsPerClient else {
            send(ServerMessage.error(ErrorMessage(code: .tooManySubscriptions, subscriptionID: id, message: "at most \(configuration.maxSubscriptionsPerClient) subscriptions per client")), to: client)
            return
        }
        // Every subscription costs a send per due vblank: one user's total bounds its share of a tick.
        let held = clients.values.reduce(0) { $0 + ($1.uid == client.uid ? $1.subscriptions.count + $1.waiting.count : 0) }
        guard held < configuration.maxSubscriptionsPerUser else {
            send(ServerMessage.error(ErrorMessage(code: .tooManySubscriptions, subscriptionID: id, message: "uid \(client.uid) holds \(held) subscriptions, the per-user limit: end some, or raise vsyncd's --max-subscriptions-per-user")), to: client)
            return
        }
        var request = request
        if !client.features.contains(.workDurations) {
            // Protocol 1 had neither: its flag bit 1 was reserved and its SUBSCRIBE ends at the range.
            request.workDurationNs = 0
            request.flags.remove(.predictWhileOff)
        }
        // Bit 2 was reserved, and ignored, before the timing page.
        if !client.features.contains(.timingPage) { request.flags.remove(.pageOnly) }
        // The display's mode and state as they are now, not as last seen: its first tick must
        // not come at an old mode, and `primary` must pick a display that is lit.
        refreshDisplays()
        let found: Display
        switch resolve(request.selector) {
        case .one(let d): found = d
        case .ambiguous(let matches):
            send(ServerMessage.error(ErrorMessage(code: .unknownDisplay, subscriptionID: id, message: ambiguity(request.selector, matches, features: client.features))), to: client)
            return
        case .none:
            // A display that may still come (the service started before the mode was set):
            // clients that can wait do; display ids and CRTC ids name what is gone. Protocol 1
            // had no waiting: its `primary` is the first display even while all are off.
            if !client.features.contains(.waitingSubscriptions), request.selector == .primary, let first = displaysInKernelOrder.first {
                return attach(client, request, to: first)
            }
            if client.features.contains(.waitingSubscriptions), request.selector.canAppearLater {
                client.waiting[id] = request
                logger.debug("client \(client.label): subscription \(id) waits for \(request.selector)")
                send(waitingAnswer(id), to: client)
                updateHousekeeping()
                return
            }
            let problem = "no display matches \(request.selector.text)"
            let text = problem + "; " + displayNames(features: client.features, after: problem.utf8.count + 2)
            send(ServerMessage.error(ErrorMessage(code: .unknownDisplay, subscriptionID: id, message: text)), to: client)
            return
        }
        attach(client, request, to: found)
    }

    /// Makes the subscription live on `d` and answers with SUBSCRIBED.
    func attach(_ client: Client, _ request: Subscribe, to d: Display) {
        let id = request.subscriptionID
        let sub = Subscription(
            id: id, client: client, display: d, range: request.range,
            divisor: RateMapping.divisor(for: request.range, refreshHz: d.refreshHz),
            paused: request.flags.contains(.startPaused))
        sub.workDurationNs = request.workDurationNs
        sub.predictWhileOff = request.flags.contains(.predictWhileOff)
        sub.pageOnly = request.flags.contains(.pageOnly)
        sub.selector = request.selector
        client.subscriptions[id] = sub
        d.insertFairly(sub)
        logger.debug("client \(client.label): subscription \(id) on display \(d.id) at divisor \(sub.divisor)\(sub.workDurationNs > 0 ? ", work duration \(sub.workDurationNs) ns" : "")\(sub.paused ? ", paused" : "")")
        updateVBlank(d)  // first, so vblanks are requested by the time the client hears back
        send(subscribed(sub), to: client)
    }

    /// SUBSCRIBED for a subscription still waiting for its display: display id 0, divisor 0.
    func waitingAnswer(_ id: UInt32) -> ServerMessage {
        .subscribed(Subscribed(
            subscriptionID: id, displayID: 0, divisor: 0, displayIntervalNs: 0, clientIntervalNs: 0,
            display: DisplayInfo(
                displayID: 0, crtcID: 0, connectorID: 0, state: .off, flags: [], refreshMillihertz: 0, periodNs: 0,
                width: 0, height: 0, connectorName: "", deviceName: "")))
    }

    /// Attaches waiting subscriptions whose display is now there.
    func attachWaiting() {
        for client in clients.values where !client.waiting.isEmpty && client.closeReason == nil {
            for id in client.waiting.keys.sorted() {
                guard let request = client.waiting[id], case .one(let d) = resolve(request.selector) else { continue }
                client.waiting[id] = nil
                attach(client, request, to: d)
            }
        }
    }

    func remove(_ sub: Subscription) {
        sub.client.subscriptions[sub.id] = nil
        sub.client.pendingTicks.removeAll { $0.sub === sub }
        settle(sub.client)
        let d = sub.display
        d.subscriptions.removeAll { $0 === sub }
        updateVBlank(d)
    }

    func disconnect(_ client: Client, reason: String, level: Logger.Level) {
        guard client.closeReason == nil else { return }
        client.closeReason = reason
        let touched = Set(client.subscriptions.values.map { ObjectIdentifier($0.display) })
        for sub in client.subscriptions.values { sub.display.subscriptions.removeAll { $0 === sub } }
        client.subscriptions = [:]
        client.waiting = [:]
        client.pendingTicks = []
        if client.blockedSinceNs != nil {
            client.blockedSinceNs = nil
            blockedClients -= 1
        }
        unregister(client.fd)
        clients[client.fd] = nil
        statusDirty = true
        logger.log(level: level, "client disconnected: \(client.label): \(reason) (\(clients.count) client(s))")
        for d in displays where touched.contains(ObjectIdentifier(d)) { updateVBlank(d) }
        updateHousekeeping()
    }
}
