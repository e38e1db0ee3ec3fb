import Glibc
import Logging
import VsyncCore

// Variable refresh (VRR): ticks without a grid, polling VRR_ENABLED (the kernel raises no
// event when a compositor sets it), and a VRR toggle as one configuration change.
extension Server {
    /// A vblank while VRR is on. As `vblank`, but the refresh model is not fed (varying
    /// intervals are neither mode changes nor period restarts, so no re-read and no generation
    /// storm) and targets and timelines are the earliest the vblanks can come: the last vblank
    /// plus k shortest intervals, flagged `variable`.
    func variableVBlank(_ d: Display, sequence: UInt64, timestampNs: UInt64) {
        let previous = d.model.newest
        guard d.model.addUnfitted(sequence: sequence, timestampNs: timestampNs) else { return }
        d.newestIsCurrent = true
        publishVBlank(d)
        let timing = d.variableTiming
        // No frame is shorter than the mode's: one well under it (10 %, beyond any stamp's
        // jitter) is a faster mode nobody announced, re-read once the ticks are out. Longer
        // intervals are what VRR does, so they prompt nothing.
        if let previous, sequence == previous.sequence &+ 1,
            timestampNs &- previous.timestampNs < timing.shortestNs / 10 * 9
        {
            d.recheckPending = true
        }
        var flags: TickFlags = source.isSynthetic ? .synthetic : .hardwareTimestamp
        flags.insert(.variable)
        sendTicks(d, sequence: sequence, timestampNs: timestampNs, flags: flags, intervalNs: timing.shortestNs) {
            timing.earliest(sequence: $0, after: (sequence, timestampNs))
        }
    }

    /// Reads VRR_ENABLED of the displays whose monitor can do VRR and whose vblanks are on
    /// (someone follows them: never otherwise), at most once a frame each, piggybacked on the
    /// vblank read. A change re-reads the CRTC, and `apply` takes it in.
    func pollVariableRefresh() {
        var now: UInt64 = 0
        for d in displays where d.state == .on && d.newestIsCurrent && d.source.variableRefresh?.capable == true {
            if now == 0 { now = monotonicNow() }
            guard now &- d.variableRefreshPolledNs >= UInt64(d.model.periodNs) else { continue }
            pollVariableRefresh(d, now: now)
        }
    }

    private func pollVariableRefresh(_ d: Display, now: UInt64) {
        guard source.isActive(d.key) else { return }
        d.variableRefreshPolledNs = now
        guard let enabled = source.variableRefreshEnabled(d.key), enabled != d.source.variableRefresh?.enabled else { return }
        recheck(d, now: now)
    }

    /// Before a vblank is ticked on the fixed grid: if it came off the grid (by the 0.5 % that
    /// also prompts a re-read of the mode) on a display that can do VRR, VRR_ENABLED is read
    /// first, so the vblank at which VRR turned on is ticked as variable (its next vblank may
    /// come a shortest interval after it) and not aimed at a grid that is gone. One read per
    /// deviating vblank, none on the grid. True if it read (the display may have changed).
    func variableRefreshMayHaveTurnedOn(_ d: Display, sequence: UInt64, timestampNs: UInt64) -> Bool {
        guard d.source.variableRefresh?.capable == true, d.newestIsCurrent, let last = d.model.newest,
            sequence == last.sequence &+ 1, timestampNs > last.timestampNs,
            abs(Double(timestampNs - last.timestampNs) - d.model.periodNs) > 0.005 * d.model.periodNs
        else { return false }
        pollVariableRefresh(d, now: monotonicNow())
        return true
    }

    /// Called by `apply` once a fresh read is in: VRR went on or off on a display that stayed
    /// on. One configuration change: one generation (none more if this read's mode change
    /// already counted it), a fresh model (it was not fed while VRR was on), paced frames aimed
    /// afresh, and DISPLAY_EVENT `variableRefreshChanged` to protocol 5 followers.
    func variableRefreshApplied(_ d: Display, wasOn: Bool, wasVariable: Bool, generation: UInt32) {
        guard wasOn, d.state == .on, d.isVariable != wasVariable else { return }
        displays.changed = true
        let t = d.variableTiming
        logger.info(
            "display \(d.id) (\(d.source.connectorName)): variable refresh \(d.isVariable ? "on, \(t.shortestNs)-\(t.longestNs) ns" : "off")"
        )
        if d.generation == generation {
            d.resetModel()
        }
        d.recheckPending = false
        broadcastEvent(.variableRefreshChanged, d)
        for sub in d.subscriptions { sub.displayChanged() }
        updatePacing(d)
    }

    /// A DISPLAY_EVENT with the (CLOCK_MONOTONIC, CLOCK_REALTIME) pair taken as it is built
    /// (protocol 5: what a client maps the event's times onto the wall clock with).
    func displayEvent(_ kind: DisplayEventKind, _ d: Display) -> DisplayEvent {
        var record = info(d)
        record.clock = ClockPair.tightest(monotonic: monotonicNow, realtime: { clockNow(CLOCK_REALTIME) })
        return DisplayEvent(kind: kind, display: record)
    }
}
