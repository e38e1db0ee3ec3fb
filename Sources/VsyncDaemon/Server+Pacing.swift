import Glibc
import VsyncCore

// Ticks on the pacing timer rather than on a vblank: subscriptions with a work duration (woken
// at P(s) − W for each target vblank s) and, while a display is off, subscriptions that asked
// for predicted ticks. One absolute CLOCK_MONOTONIC timerfd serves them all, armed at the
// earliest wake; the model keeps being fed by real vblanks, and wakes are recomputed from it.
extension Server {
    /// Whether the pacing timer, not a vblank, delivers this subscription's ticks.
    func isPaced(_ sub: Subscription) -> Bool {
        guard !sub.paused, !sub.pageOnly else { return false }
        return sub.display.isPredicting ? sub.predictWhileOff : sub.workDurationNs > 0 || sub.display.isModelTimed
    }

    /// The newest vblank the display had: the last real one while it is on (none until the
    /// first since vblank events were turned on), else the model's.
    private func latestVBlank(_ d: Display, now: UInt64) -> (sequence: UInt64, timestampNs: UInt64)? {
        guard let last = d.model.newest else { return nil }
        guard d.isPredicting || d.isModelTimed else { return d.newestIsCurrent ? last : nil }
        let s = FramePacing.latestVBlank(atOrBefore: now, atLeast: last.sequence, periodNs: d.model.periodNs) {
            d.predictedTimestamp(forSequence: $0)
        }
        return (s, d.model.line.predictedTimestamp(forSequence: s))
    }

    /// Recomputes the display's paced wakes from its model (after a vblank, or a change to a
    /// subscription, the mode or the display's state) and re-arms the timer.
    func updatePacing(_ d: Display, now: UInt64 = monotonicNow(), arm: Bool = true) {
        var earliest: UInt64?
        let latest = latestVBlank(d, now: now)
        var predicting = false
        for sub in d.subscriptions {
            guard isPaced(sub), let latest else {
                sub.pacer.reschedule()
                continue
            }
            if d.isPredicting { predicting = true }
            if d.holdsPacing(sub.pacer, latestSequence: latest.sequence) { continue }  // VRR: wait for the vblank
            let wake = sub.pacer.update(
                divisor: sub.divisor, workDurationNs: sub.workDurationNs, latestSequence: latest.sequence,
                nowNs: now, periodNs: d.pacingPeriodNs, variable: d.isVariable
            ) { d.predictedTimestamp(forSequence: $0) }
            earliest = min(earliest ?? wake, wake)
        }
        // Off, with subscribers: re-read the CRTC once a frame while someone gets predicted
        // ticks, and for a moment after it went off (a mode set lights it again within
        // milliseconds), so ticks resume within frames of the first real vblank; after that the
        // twice-a-second housekeeping poll is enough, and costs an idle machine nothing more.
        if d.state == .off, !d.subscriptions.isEmpty,
            predicting || d.offSinceNs.map({ now &- $0 < Display.offProbeWindowNs }) ?? false
        {
            let probe = d.lastRecheckNs &+ UInt64(d.model.periodNs)
            earliest = min(earliest ?? probe, probe)
        }
        // Sparse sampling: the next burst (a display followed only through the page has no
        // other wake).
        if let burst = d.sampling.nextBurstNs, d.isFollowed { earliest = min(earliest ?? burst, burst) }
        d.nextWakeNs = earliest
        if arm { armPacing() }
    }

    /// Arms the timer at the earliest wake of any display, or disarms it: no paced
    /// subscription running, no wake-up. `fired`: the timer expired and was not read, so it is
    /// set (or disarmed) anew even to the same deadline, which clears its count.
    func armPacing(fired: Bool = false) {
        var earliest: UInt64?
        for d in displays { if let w = d.nextWakeNs { earliest = min(earliest ?? w, w) } }
        pacing.arm(at: earliest, fired: fired)
    }

    /// The pacing timer fired: every paced subscription whose wake has come gets its tick and
    /// its next target; a display that is off is re-read if its probe is due.
    func wake() {
        let now = monotonicNow()
        for d in displays where d.nextWakeNs.map({ $0 <= now }) ?? false {
            // Between bursts no event tells of a mode set or of the CRTC going off: the CRTC is
            // read (its mode, and VRR_ENABLED where the connector has it; no interrupt) before the
            // model ticks on a grid that may be dead.
            if d.isModelTimed, now &- d.lastRecheckNs >= UInt64(d.model.periodNs / 2) {
                recheck(d, now: now)
                guard displays.isListed(d) else { continue }
                // A new mode starts the model over, and it learns from real vblanks: events on.
                if d.wantsVBlank != source.isActive(d.key) { updateVBlank(d) }
            }
            if let latest = latestVBlank(d, now: now) { deliverPaced(d, latest: latest, now: now) }
            startBurstIfDue(d, now: now)
            if d.state == .off, now &- d.lastRecheckNs >= UInt64(d.model.periodNs) {
                recheck(d, now: now)
                guard displays.isListed(d) else { continue }
            }
            updatePacing(d, now: now, arm: false)
        }
        armPacing(fired: true)
    }

    /// Hands out every due frame; the next ones are aimed at afterwards (`updatePacing`), once
    /// the ticks are out.
    private func deliverPaced(_ d: Display, latest: (sequence: UInt64, timestampNs: UInt64), now: UInt64) {
        let interval = d.intervalNs
        // Model-timed (sparse sampling): the timestamp is the model's, of a display that is on.
        let modelTimed = d.isModelTimed
        var flags: TickFlags =
            d.isPredicting ? .predicted : modelTimed ? .modelTimed : (source.isSynthetic ? .synthetic : .hardwareTimestamp)
        if (d.isPredicting || modelTimed) && source.isSynthetic { flags.insert(.synthetic) }
        if d.isVariable { flags.insert(.variable) }  // targets are the earliest vblanks (Display+VariableRefresh)
        let periodNs = d.pacingPeriodNs
        for sub in d.subscriptions where isPaced(sub) {
            guard
                let (t, passed) = sub.pacer.fire(
                    nowNs: now, newestSequence: latest.sequence, periodNs: periodNs,
                    variable: d.isVariable)
            else { continue }
            // A predicted tick without a work duration is the vblank itself, as a hardware tick
            // would be; with one, the newest vblank and the target ahead.
            let onTarget = sub.workDurationNs == 0 && (d.isPredicting || modelTimed)
            if onTarget, modelTimed {
                // Counted as on the vblank path, which it takes turns with: every due vblank
                // since the last one ticked either way (the pacer, restarted at each burst's
                // end, knows only its own).
                let divisor = UInt64(sub.divisor)
                if let last = sub.lastDueSequence, t.sequence > last {
                    sub.skipped &+= UInt32(clamping: t.sequence / divisor - last / divisor - 1)
                }
                sub.lastDueSequence = t.sequence
            } else {
                sub.skipped &+= UInt32(clamping: passed)
            }
            let targetSequence = onTarget ? t.sequence &+ UInt64(sub.divisor) : t.sequence
            let timelines = FramePacing.timelines(from: targetSequence, divisor: sub.divisor) {
                d.predictedTimestamp(forSequence: $0)
            }
            let tick = Tick(
                subscriptionID: sub.id, displayID: d.id, sequence: onTarget ? t.sequence : latest.sequence,
                timestampNs: onTarget ? t.presentationNs : latest.timestampNs,
                targetTimestampNs: timelines[0].presentationNs,
                displayIntervalNs: interval, clientIntervalNs: interval &* UInt64(sub.divisor),
                skipped: 0, divisor: sub.divisor, flags: flags, targetSequence: targetSequence,
                timelines: timelines, generation: d.generation)
            offer(tick, to: sub)
        }
    }
}
