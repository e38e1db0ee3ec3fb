import Glibc
import Logging
import VsyncCore

// Vblanks in, ticks out: per-subscription rate, skipped counts and coalescing.
extension Server {
    func handleSource(_ fd: Int32) {
        // Reuse one array's storage across vblanks; take it out so a nested call cannot alias it.
        var events = sourceEvents
        sourceEvents = []
        events.removeAll(keepingCapacity: true)
        defer { sourceEvents = events }
        source.readEvents(from: fd, into: &events)
        handle(events)
        // Re-arming costs syscalls: done once the ticks are out.
        events.removeAll(keepingCapacity: true)
        source.rearm(into: &events)
        handle(events)
    }

    private func handle(_ events: [SourceEvent]) {
        for event in events {
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

    func vblank(_ d: Display, sequence: UInt64, timestampNs: UInt64) {
        // The kernel flushes a pending event when a CRTC goes off or changes mode, carrying the
        // last vblank's count again: a vblank is ticked once, never twice.
        if let last = d.lastSample, sequence <= last.sequence { return }
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
        // Subscribers mostly share a divisor: predict once per distinct divisor, not per
        // subscriber (each prediction copies the display's model).
        var predictedDivisor: UInt64 = 0
        var predictedTarget: UInt64 = 0
        for sub in d.subscriptions where !sub.paused {
            let divisor = UInt64(sub.divisor)
            guard RateMapping.isTickDue(sequence: sequence, divisor: sub.divisor) else { continue }
            if let last = sub.lastDueSequence, sequence > last {
                // Due ticks whose vblank never reached us count as skipped too.
                sub.skipped &+= UInt32(clamping: sequence / divisor - last / divisor - 1)
            }
            sub.lastDueSequence = sequence
            if divisor != predictedDivisor {
                predictedDivisor = divisor
                predictedTarget = d.model.predictedTimestamp(forSequence: sequence &+ divisor)
            }
            let tick = Tick(
                subscriptionID: sub.id, displayID: d.id, sequence: sequence, timestampNs: timestampNs,
                targetTimestampNs: predictedTarget,
                displayIntervalNs: interval, clientIntervalNs: interval &* divisor,
                skipped: 0, divisor: sub.divisor, flags: flags)
            offer(tick, to: sub)
        }
    }

    /// Sends a tick now if the client's socket has room, else keeps it as the newest pending one.
    func offer(_ tick: Tick, to sub: Subscription) {
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

    func sendTick(_ tick: Tick, _ sub: Subscription) -> Client.SendResult {
        var t = tick
        t.skipped = sub.skipped
        let n = t.encode(into: tickBuffer)
        let result = Client.send(sub.client.fd, tickBuffer.baseAddress, n)
        if case .sent = result { sub.skipped = 0 }
        return result
    }
}
