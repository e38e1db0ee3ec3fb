import Glibc
import Logging
import VsyncCore

// Displays: scanning, mode changes, off/on, removal, and when to ask for vblanks.
extension Server {
    /// Adds displays the source now has, removes those it no longer has, and takes in what
    /// changed on the others (mode, on/off, connector, EDID) whether or not anyone follows them:
    /// LIST_DISPLAYS, `primary` and a new subscription's first tick must see the display as it is.
    func rescanDisplays(announce: Bool) {
        displays.changed = true
        displays.lastRescanNs = monotonicNow()
        let found = source.rescan()
        loop.syncSource(Set(source.pollDescriptors), logger: logger)
        let keys = Set(found.map(\.key))
        for d in displays where !keys.contains(d.key) { removeDisplay(d, reason: "no longer on its card") }
        for s in found {
            guard let d = displays.first(where: { $0.key == s.key }) else { continue }
            d.lastRecheckNs = displays.lastRescanNs
            apply(s, to: d)
        }
        for s in found where s.isActive && !displays.contains(where: { $0.key == s.key }) {
            let d = displays.add(s, sampling: configuration.vblankSampling)
            placeOnPage(d)
            let names =
                (s.busPath.isEmpty ? "" : ", bus path \(s.busPath)") + (s.edid.map { ", EDID \($0.make)/\($0.model)/\($0.serial)" } ?? "")
                + s.variableRefreshText
            logger.info(
                "display \(d.id) added: \(s.connectorName) on \(s.key), \(s.refresh.map { "\($0)" } ?? "no mode"), \(s.width)x\(s.height)\(names)"
            )
            if announce {
                let message = ServerMessage.displayEvent(displayEvent(.added, d))
                for c in clients where c.version != nil { send(message, to: c) }
            }
        }
        updatePrimary()
        attachWaiting()
    }

    /// A CRTC lit after startup on a card already open raises no event (a hotplug uevent is
    /// for connectors), so a client asking about displays triggers a rescan, at most twice a
    /// second; housekeeping rescans while a subscription waits for a display.
    func rescanIfStale() {
        let now = monotonicNow()
        guard now &- displays.lastRescanNs >= 500_000_000 else { return }
        rescanDisplays(announce: true)
    }

    func removeDisplay(_ d: Display, reason: String) {
        logger.warning("display \(d.id) (\(d.source.connectorName) on \(d.key)) removed: \(reason)")
        if source.isActive(d.key) { try? source.setActive(d.key, false, token: d.token) }
        d.state = .off
        let message = ServerMessage.displayEvent(displayEvent(.removed, d))
        var told = Set<Int32>()
        for sub in d.subscriptions {
            detach(sub)
            if told.insert(sub.client.fd).inserted { send(message, to: sub.client) }
            if keepWaiting(sub) { send(waitingAnswer(sub.id), to: sub.client) }
        }
        d.nextWakeNs = nil
        takeOffPage(d)
        displays.remove(d)
        armPacing()
        updatePrimary()
    }

    /// Re-reads a display's CRTC and reports what changed.
    func recheck(_ d: Display, now: UInt64 = monotonicNow()) {
        d.lastRecheckNs = now
        guard let fresh = source.refresh(d.key) else {
            removeDisplay(d, reason: "its CRTC or card is gone")
            return
        }
        apply(fresh, to: d)
        updatePrimary()
    }

    /// Takes in what the source says of a display now, and tells its subscribers what changed.
    func apply(_ fresh: SourceDisplay, to d: Display) {
        d.sourceRead()
        defer { d.applied() }
        let was = (on: d.state == .on, variable: d.isVariable, generation: d.generation)
        defer { variableRefreshApplied(d, wasOn: was.on, wasVariable: was.variable, generation: was.generation) }
        let old = d.source
        let lit = d.litSource
        d.source = fresh
        if fresh.busPath != old.busPath || fresh.edid != old.edid || fresh.connectorName != old.connectorName { displays.changed = true }
        if !fresh.isActive {
            if d.state == .on { turnOff(d) }
        } else if d.state == .off {
            turnOn(d, modeChanged: !fresh.sameMode(as: lit ?? old))
        } else if !fresh.sameMode(as: old) {
            logger.info(
                "display \(d.id) mode changed: \(old.refresh.map { "\($0)" } ?? "?") \(old.width)x\(old.height) → \(fresh.refresh.map { "\($0)" } ?? "?") \(fresh.width)x\(fresh.height)"
            )
            d.resetModelForNewMode(now: monotonicNow())
            broadcastEvent(.modeChanged, d)
            resubscribeAll(d, countGoesOn: true)
        }
    }

    func turnOff(_ d: Display) {
        displays.changed = true
        logger.info("display \(d.id) (\(d.source.connectorName)) is off")
        if source.isActive(d.key) { try? source.setActive(d.key, false, token: d.token) }
        d.state = .off
        d.turnedOff()
        d.offSinceNs = monotonicNow()
        for sub in d.subscriptions { sub.resetDelivery() }
        broadcastEvent(.off, d)
        updatePacing(d)  // predicted ticks, for those who asked
    }

    func turnOn(_ d: Display, modeChanged: Bool) {
        displays.changed = true
        logger.info("display \(d.id) (\(d.source.connectorName)) is on: \(d.source.refresh.map { "\($0)" } ?? "?")")
        d.state = .on
        d.offSinceNs = nil
        d.resetModel()
        broadcastEvent(.on, d)
        if modeChanged { broadcastEvent(.modeChanged, d) }
        resubscribeAll(d)
        updateVBlank(d)
    }

    func broadcastEvent(_ kind: DisplayEventKind, _ d: Display) {
        let event = displayEvent(kind, d)
        burstNow(d)  // sparse sampling: real vblanks again before the model ticks on
        publishTiming(d, flags: event.display.flags)
        let message = ServerMessage.displayEvent(event)
        var told = Set<Int32>()
        for sub in d.subscriptions where sub.client.features.isSuperset(of: kind.requiredFeatures) && told.insert(sub.client.fd).inserted {
            send(message, to: sub.client)
        }
    }

    /// Recomputes every subscriber's divisor for the display's current refresh and re-sends
    /// SUBSCRIBED. `countGoesOn`: the display stayed on (a mode change), so a subscription whose
    /// divisor stays keeps counting the ticks it did not get; after off and on it starts afresh.
    func resubscribeAll(_ d: Display, countGoesOn: Bool = false) {
        for sub in d.subscriptions {
            let divisor = RateMapping.divisor(for: sub.range, refreshHz: d.refreshHz)
            if countGoesOn && divisor == sub.divisor { sub.displayChanged() } else { sub.resetDelivery() }
            sub.divisor = divisor
            send(subscribed(sub), to: sub.client)
        }
        updatePacing(d)
    }

    func subscribed(_ sub: Subscription) -> ServerMessage {
        let d = sub.display
        return .subscribed(
            Subscribed(
                subscriptionID: sub.id, displayID: d.id, divisor: sub.divisor,
                displayIntervalNs: d.intervalNs, clientIntervalNs: d.intervalNs * UInt64(sub.divisor), display: info(d)))
    }

    /// Asks the source for vblanks exactly while someone is listening.
    func updateVBlank(_ d: Display) {
        let want = d.wantsVBlank
        guard want != source.isActive(d.key) else { return updatePacing(d) }
        do throws(VBlankFailure) {
            if want { source.limitQueue(d.key, to: d.sampling.queueDepth) }
            try source.setActive(d.key, want, token: d.token)
            if want && d.vblankRefused {
                d.vblankRefused = false
                d.resetModel()  // real vblanks again: the model restarts from them
            }
            if want {
                d.lastRecheckNs = monotonicNow()
                // The last vblank seen is from before the idle spell: paced ticks wait for a
                // fresh one, so that a tick's newest vblank is never an old one.
                d.newestIsCurrent = false
            }
            updatePacing(d)
            publishTiming(d)
            logger.debug("display \(d.id): vblank events \(want ? "on" : "off")")
        } catch {
            handleFailure(d, error)
        }
        // Vblank events on or off, or subscribers come or gone on a display that is off.
        displays.changed = true
    }

    func handleFailure(_ d: Display, _ failure: VBlankFailure) {
        switch failure {
        case .off:
            if d.state == .on { turnOff(d) }
        case .gone:
            logger.error("display \(d.id): its device \(d.key.device) is gone")
            rescanDisplays(announce: true)
            if displays.isListed(d) { removeDisplay(d, reason: "device gone") }
        case .other(let text):
            if !d.vblankRefused { logger.error("display \(d.id): vblank events failed: \(text)") }
            d.vblankRefused = true
            updatePacing(d)
        }
        updatePrimary()
        displays.changed = true
    }
}
