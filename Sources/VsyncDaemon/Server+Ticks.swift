import Glibc
import Logging
import VsyncCore

// Vblanks in, ticks out: per-subscription rate, skipped counts and coalescing.
extension Server {
    func handleSource(_ fd: Int32) {
        // Reuse one array's storage across vblanks; take it out so a nested call cannot alias it.
        var events = displays.sourceEvents
        displays.sourceEvents = []
        events.removeAll(keepingCapacity: true)
        defer { displays.sourceEvents = events }
        checkSuspend()
        source.readEvents(from: fd, into: &events)
        handle(events)
        // Re-arming and re-reading a mode cost syscalls: done once the ticks are out.
        events.removeAll(keepingCapacity: true)
        source.rearm(into: &events)
        handle(events)
        recheckDeviating()
        pollVariableRefresh()
    }

    /// Re-reads the CRTCs whose last interval deviated from the model. A display whose intervals
    /// keep deviating without a mode change (VRR, a noisy clock) is re-read at most once a
    /// second, by housekeeping, after a few fruitless tries.
    private func recheckDeviating() {
        for d in displays where d.recheckPending {
            d.recheckPending = false
            guard d.fruitlessRechecks < 3 else { continue }
            let before = d.source
            recheck(d)
            if d.state == .on, displays.isListed(d), d.source.sameMode(as: before) { d.fruitlessRechecks += 1 }
        }
    }

    /// Re-reads the CRTC of a display whose vblank the model rejected; true if the display
    /// changed: it went off or away, or its model was started over for a new mode (the vblank
    /// then seeds the new one). At most a few fruitless reads in a row, as for deviating
    /// intervals: a noisy clock is not re-read on every vblank.
    private func modeChangedUnderOutlier(_ d: Display) -> Bool {
        guard d.fruitlessRechecks < 3 else { return false }
        let before = d.source
        recheck(d)
        guard d.state == .on, displays.isListed(d) else { return true }
        if d.model.newest == nil { return true }
        if d.source.sameMode(as: before) { d.fruitlessRechecks += 1 }
        return false
    }

    private func handle(_ events: [SourceEvent]) {
        for event in events {
            switch event {
            case .vblank(let token, let sequence, let timestamp):
                guard let d = displays[token: token], d.state == .on else { continue }
                vblank(d, sequence: sequence, timestampNs: timestamp)
            case .failed(let token, let failure):
                guard let d = displays[token: token] else { continue }
                handleFailure(d, failure)
            case .requeued(let token):
                guard let d = displays[token: token], d.state == .on else { continue }
                requeued(d)
            case .devicesChanged:
                hotplugged()
            }
        }
    }

    func vblank(_ d: Display, sequence: UInt64, timestampNs: UInt64) {
        if d.modeSetTail != nil, heldInModeSetTail(d, sequence: sequence, timestampNs: timestampNs) { return }
        // A vblank off the grid may be the first under VRR: known before it is ticked.
        if !d.isVariable, variableRefreshMayHaveTurnedOn(d, sequence: sequence, timestampNs: timestampNs) {
            guard d.state == .on, displays.isListed(d) else { return }
        }
        if d.isVariable {
            d.sampling.relearn()  // no grid to predict: events stay on
            return variableVBlank(d, sequence: sequence, timestampNs: timestampNs)
        }
        let sparse = d.sampling.mode == .sparse
        if sparse || d.sampling.rephasePending { guard judgeSample(d, sequence: sequence, timestampNs: timestampNs) else { return } }
        let previous = d.model.newest
        let followed = d.newestIsCurrent
        let periodRestarts = d.model.periodRestartCount
        switch d.model.add(sequence: sequence, timestampNs: timestampNs) {
        case .duplicate, .stale: return
        case .restarted:
            d.fruitlessRechecks = 0  // the model saw the period change: re-read the mode soon
            // A new phase with vblank events on since the vblank before: the grid moved under
            // the display's followers. After an idle spell it is the model catching up.
            if followed, d.model.periodRestartCount == periodRestarts { d.phaseMoved() }
        case .outlier:
            // Off the model's grid, perhaps the first vblank of a mode set while none reached
            // us: the CRTC is read before this vblank is ticked, so its target is on the new grid.
            if modeChangedUnderOutlier(d) {
                guard d.state == .on, displays.isListed(d), !d.isVariable else { return }
                d.model.seed(sequence: sequence, timestampNs: timestampNs)
                d.modeSetTail = nil  // an outlier is off the old grid: the new mode has begun
            }
        case .accepted: break
        }
        d.newestIsCurrent = true
        publishVBlank(d)
        // A vblank interval off the model by > 0.5 % may be a mode change nobody announced: the
        // CRTC is re-read once this read's ticks are out (`recheckDeviating`), not before them.
        if let previous, sequence == previous.sequence &+ 1, timestampNs > previous.timestampNs {
            let deviation = abs(Double(timestampNs - previous.timestampNs) - d.model.periodNs)
            if deviation > 0.005 * d.model.periodNs {
                d.recheckPending = true
            } else {
                d.fruitlessRechecks = 0
            }
        }
        let flags: TickFlags = source.isSynthetic ? .synthetic : .hardwareTimestamp
        sendTicks(d, sequence: sequence, timestampNs: timestampNs, flags: flags, intervalNs: d.periodNs) {
            d.model.line.predictedTimestamp(forSequence: $0)
        }
        if sparse { sampled(d, timestampNs: timestampNs) }
    }

    /// The old mode's vblanks after its successor was read are not ticked (`ModeSetTail`).
    private func heldInModeSetTail(_ d: Display, sequence: UInt64, timestampNs: UInt64) -> Bool {
        let heldBefore = d.modeSetTail?.held ?? 0
        if d.isInModeSetTail(sequence: sequence, timestampNs: timestampNs) { return true }
        if heldBefore > 0 {
            logger.debug("display \(d.id): \(heldBefore) vblanks of the old mode came after the new mode was read; not ticked")
        }
        return false
    }

    /// One vblank's ticks to the display's subscribers that are due at this sequence, each
    /// with the target and timelines `predict` puts on the vblanks ahead (the model's grid, or
    /// under VRR the earliest they can be); then paced wakes are re-aimed, as they move with it.
    func sendTicks(
        _ d: Display, sequence: UInt64, timestampNs: UInt64, flags: TickFlags, intervalNs interval: UInt64,
        predict: (UInt64) -> UInt64
    ) {
        // Subscribers mostly share a divisor: predict once per distinct divisor, not per subscriber.
        var predictedDivisor: UInt32 = 0
        var timelines = FrameTimelines()
        var stamp: UInt64 = 0
        var paced = false
        // Sparse sampling: while the model times the ticks, a vblank still in flight is not
        // ticked again, nor one the pacing timer already ticked.
        let sparse = d.sampling.mode == .sparse
        let modelTimed = sparse && d.isModelTimed
        if modelTimed { paced = d.subscriptions.contains { !$0.paused && !$0.pageOnly } }
        for sub in modelTimed ? [] : d.subscriptions where !sub.paused {
            if sub.pageOnly { continue }
            if sub.workDurationNs > 0 {
                paced = true
                continue
            }
            guard RateMapping.isTickDue(sequence: sequence, divisor: sub.divisor) else { continue }
            let divisor = UInt64(sub.divisor)
            if let last = sub.lastDueSequence {
                if sequence > last {
                    // Due ticks whose vblank never reached us count as skipped too.
                    sub.skipped &+= UInt32(clamping: sequence / divisor - last / divisor - 1)
                } else if sparse {
                    continue
                }
            }
            sub.lastDueSequence = sequence
            // A wake-up with a work duration longer than the frames between may have handed
            // this frame out already (the work duration was just set to 0). Sparse sampling: a
            // model-timed tick of this frame would have made it the last due (skipped above), so
            // the pacing timer passed it over (its wake came too late) and nobody got it.
            guard sub.pacer.isNew(sequence &+ divisor) else {
                if sparse { sub.skipped &+= 1 }
                continue
            }
            sub.pacer.handedOut(sequence &+ divisor)
            if sub.divisor != predictedDivisor {
                predictedDivisor = sub.divisor
                timelines = FramePacing.timelines(from: sequence &+ divisor, divisor: sub.divisor, predict: predict)
                // One tick per group, encoded once per protocol version and patched per subscriber.
                stamp = ticks.nextStamp()
            }
            let tick = Tick(
                subscriptionID: sub.id, displayID: d.id, sequence: sequence, timestampNs: timestampNs,
                targetTimestampNs: timelines[0].presentationNs,
                displayIntervalNs: interval, clientIntervalNs: interval &* divisor,
                skipped: 0, divisor: sub.divisor, flags: flags,
                targetSequence: timelines[0].sequence, timelines: timelines, generation: d.generation)
            offer(tick, to: sub, stamp: stamp)
        }
        if paced || d.nextWakeNs != nil { updatePacing(d) }
    }

    /// Sends a tick now if the client's socket has room, else keeps it as the newest pending one.
    /// `stamp`: the tick's group in this vblank's sends (`sendTicks`), 0 for a tick of its own.
    func offer(_ tick: Tick, to sub: Subscription, stamp: UInt64 = 0) {
        let client = sub.client
        guard client.closeReason == nil else { return }
        if !client.pendingTicks.isEmpty, let i = client.pendingIndex(of: sub) {
            sub.skipped &+= 1  // the older pending tick is replaced, never sent
            client.pendingTicks[i].tick = tick
            return
        }
        if !client.isBlocked {
            switch sendTick(tick, sub, stamp: stamp) {
            case .sent: return
            case .full: break
            case .failed(let e):
                sendFailed(client, e)
                return
            }
        }
        client.pendingTicks.append((sub, tick))
        markBlocked(client)
    }

    func sendTick(_ tick: Tick, _ sub: Subscription, stamp: UInt64 = 0) -> Client.SendResult {
        let version = sub.client.encodingVersion
        let buffer = ticks.buffer
        let n: Int
        // Each access to `ticks` is a load or a store with no call inside it, so the optimizer
        // can prove none overlaps another and drops the runtime's exclusivity check.
        if let size = ticks.size(ofStamp: stamp, version: version) {
            // The buffer holds this very tick for another subscriber: only whose it is and its
            // skipped count differ.
            Tick.patch(buffer, subscriptionID: tick.subscriptionID, skipped: sub.skipped)
            n = size
        } else {
            var t = tick
            t.skipped = sub.skipped
            n = t.encode(into: buffer, version: version)
            ticks.hold(stamp: stamp, version: version, size: n)
        }
        let result = Client.send(sub.client.fd, buffer.baseAddress, n)
        if case .sent = result { sub.skipped = 0 }
        return result
    }
}
