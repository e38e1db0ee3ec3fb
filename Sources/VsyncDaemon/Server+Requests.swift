import Glibc
import Logging
import VsyncCore

// Requests: one switch hands each to the handler named after it.
extension Server {
    func handle(_ result: Result<ClientMessage, WireError>, from client: Client) {
        guard client.version != nil else {
            switch result {
            case .success(.hello(let hello)): handleHello(client, hello)
            case .success(let other):
                fail(
                    client,
                    .error(ErrorMessage(code: .notHandshaken, message: "send HELLO first (got \(other.type) before the handshake)")),
                    reason: "request \(other.type) before the handshake")
            case .failure(let e):
                fail(
                    client, .refused(Refusal(code: .badHandshake, message: "the first message must be a HELLO: \(e)")),
                    reason: "bad handshake: \(e)")
            }
            return
        }
        switch result {
        case .failure(.unknownType(let t)):
            fail(
                client, .error(ErrorMessage(code: .unknownType, message: "unknown request type 0x\(String(t, radix: 16))")),
                reason: "unknown request type 0x\(String(t, radix: 16))")
        case .failure(.badSelector(let id, let problem)):
            refuseSelector(client, id: id, problem)
        case .failure(let e):
            fail(client, .error(ErrorMessage(code: .malformed, message: "\(e)")), reason: "malformed request: \(e)")
        case .success(.hello):
            fail(client, .error(ErrorMessage(code: .malformed, message: "second HELLO")), reason: "second HELLO")
        case .success(.listDisplays): handleListDisplays(client)
        case .success(.subscribe(let request)): handleSubscribe(client, request)
        case .success(.setRate(let request)): handleSetRate(client, request)
        case .success(.setWorkDuration(let request)): handleSetWorkDuration(client, request)
        case .success(.pause(let id)): handlePause(client, id)
        case .success(.resume(let id)): handleResume(client, id)
        case .success(.unsubscribe(let id)): handleUnsubscribe(client, id)
        }
    }

    func handleHello(_ client: Client, _ hello: Hello) {
        client.name = hello.clientName
        let low = max(hello.minVersion, WireProtocol.minimumVersion)
        let high = min(hello.maxVersion, WireProtocol.currentVersion)
        guard hello.minVersion <= hello.maxVersion, low <= high else {
            let text =
                "client speaks protocol \(hello.minVersion)–\(hello.maxVersion), vsyncd speaks \(WireProtocol.minimumVersion)–\(WireProtocol.currentVersion): update the \(hello.maxVersion < WireProtocol.minimumVersion ? "client library" : "daemon")"
            fail(client, .refused(Refusal(code: .versionUnsupported, message: text)), reason: "refused: \(text)")
            return
        }
        client.handshaken(version: high)
        logger.debug("client \(client.label): protocol \(high)")
        send(
            ServerMessage.welcome(
                Welcome(
                    version: high, serverFlags: source.isSynthetic ? .syntheticSource : [], serverPID: UInt32(getpid()))), to: client)
        if client.features.contains(.timingPage) { sendTimingPage(to: client) }
    }

    func handleListDisplays(_ client: Client) {
        refreshDisplays()
        send(ServerMessage.displayList(displays.map(info)), to: client)
    }

    func handleSetRate(_ client: Client, _ request: SetRate) {
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
    }

    func handleSetWorkDuration(_ client: Client, _ request: SetWorkDuration) {
        guard client.features.contains(.workDurations) else {
            return fail(
                client, .error(ErrorMessage(code: .unknownType, message: "SET_WORK_DURATION needs protocol 2")),
                reason: "SET_WORK_DURATION at protocol 1")
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
    }

    func handlePause(_ client: Client, _ id: UInt32) {
        if client.waiting[id] != nil {
            client.waiting[id]?.flags.insert(.startPaused)
            return
        }
        guard let sub = client.subscriptions[id] else { return unknown(client, id) }
        sub.paused = true
        sub.resetDelivery()
        settle(client)
        updateVBlank(sub.display)
    }

    func handleResume(_ client: Client, _ id: UInt32) {
        if client.waiting[id] != nil {
            client.waiting[id]?.flags.remove(.startPaused)
            return
        }
        guard let sub = client.subscriptions[id] else { return unknown(client, id) }
        if sub.paused {
            sub.paused = false
            sub.resetDelivery()
            updateVBlank(sub.display)
        }
    }

    func handleUnsubscribe(_ client: Client, _ id: UInt32) {
        if client.waiting.removeValue(forKey: id) != nil {
            clients.changed = true  // one fewer waiting: housekeeping may stop polling for it
            return
        }
        guard let sub = client.subscriptions[id] else { return unknown(client, id) }
        detach(sub)
        updateVBlank(sub.display)
    }

    func unknown(_ client: Client, _ id: UInt32) {
        send(
            ServerMessage.error(ErrorMessage(code: .unknownSubscription, subscriptionID: id, message: "no subscription \(id)")), to: client)
    }

    func handleSubscribe(_ client: Client, _ request: Subscribe) {
        let id = request.subscriptionID
        guard id != 0 else {
            fail(client, .error(ErrorMessage(code: .malformed, message: "subscription id 0 is reserved")), reason: "subscription id 0")
            return
        }
        if client.subscriptions[id] != nil || client.waiting[id] != nil {
            send(
                ServerMessage.error(
                    ErrorMessage(code: .duplicateSubscription, subscriptionID: id, message: "subscription \(id) already exists")),
                to: client)
            return
        }
        guard client.subscriptions.count + client.waiting.count < configuration.maxSubscriptionsPerClient else {
            send(
                ServerMessage.error(
                    ErrorMessage(
                        code: .tooManySubscriptions, subscriptionID: id,
                        message: "at most \(configuration.maxSubscriptionsPerClient) subscriptions per client")), to: client)
            return
        }
        if let problem = subscriptionShareExceeded(by: client) {
            send(ServerMessage.error(ErrorMessage(code: .tooManySubscriptions, subscriptionID: id, message: problem)), to: client)
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
        // Bit 3 likewise before model-timed ticks.
        if !client.features.contains(.modelTimedTicks) { request.flags.remove(.hardwareTicks) }
        // The display's mode and state as they are now, not as last seen: its first tick must
        // not come at an old mode, and `primary` must pick a display that is lit.
        refreshDisplays()
        let found: Display
        switch resolve(request.selector) {
        case .one(let d): found = d
        case .ambiguous(let matches):
            send(
                ServerMessage.error(
                    ErrorMessage(
                        code: .unknownDisplay, subscriptionID: id, message: ambiguity(request.selector, matches, features: client.features))
                ), to: client)
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
                clients.changed = true  // housekeeping polls for the display it waits for
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
        sub.hardwareTicks = request.flags.contains(.hardwareTicks)
        sub.selector = request.selector
        client.subscriptions[id] = sub
        d.insertFairly(sub)
        logger.debug(
            "client \(client.label): subscription \(id) on display \(d.id) at divisor \(sub.divisor)\(sub.workDurationNs > 0 ? ", work duration \(sub.workDurationNs) ns" : "")\(sub.paused ? ", paused" : "")"
        )
        // A burst if events sleep (sparse sampling): the model is checked before it ticks a
        // new subscriber.
        _ = d.sampling.requestBurst()
        updateVBlank(d)  // first, so vblanks are requested by the time the client hears back
        send(subscribed(sub), to: client)
    }

    /// SUBSCRIBED for a subscription still waiting for its display: display id 0, divisor 0.
    func waitingAnswer(_ id: UInt32) -> ServerMessage {
        .subscribed(
            Subscribed(
                subscriptionID: id, displayID: 0, divisor: 0, displayIntervalNs: 0, clientIntervalNs: 0,
                display: DisplayInfo(
                    displayID: 0, crtcID: 0, connectorID: 0, state: .off, flags: [], refreshMillihertz: 0, periodNs: 0,
                    width: 0, height: 0, connectorName: "", deviceName: "")))
    }

    /// Attaches waiting subscriptions whose display is now there.
    func attachWaiting() {
        for client in clients where !client.waiting.isEmpty && client.closeReason == nil {
            for id in client.waiting.keys.sorted() {
                guard let request = client.waiting[id], case .one(let d) = resolve(request.selector) else { continue }
                client.waiting[id] = nil
                attach(client, request, to: d)
            }
        }
    }
}
