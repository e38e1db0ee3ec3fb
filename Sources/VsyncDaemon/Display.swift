import VsyncCore

/// The daemon's state for one display: what the source says, the refresh model, subscribers.
final class Display {
    let id: UInt32
    /// What the source's events carry for this display: its slot in `DisplaySlots` and that
    /// slot's generation. Set when the server lists it.
    var token: UInt32 = DisplaySlots.noToken
    var source: SourceDisplay {
        didSet { if source.isActive { litSource = source } }
    }
    /// The source as last read while lit: turning on again is a mode change only against it
    /// (a CRTC read while off has no mode at all).
    private(set) var litSource: SourceDisplay?
    var model: RefreshModel
    var state: DisplayState
    var subscriptions: [Subscription] = []
    /// Last time the CRTC was re-read (mode re-check, off → on polling).
    var lastRecheckNs: UInt64 = 0
    /// When the display last turned off: a mode set turns it on again within moments, so it is
    /// re-read once a frame for `Display.offProbeWindowNs` after (see Server+Pacing.swift).
    var offSinceNs: UInt64?
    static let offProbeWindowNs: UInt64 = 2_000_000_000
    /// The newest vblank (`model.newest`, its one holder) came while vblank events have been
    /// on without a break: it is current. After an idle spell it is not, until the first comes.
    var newestIsCurrent = false
    /// Re-reads prompted by a deviating interval that found the mode unchanged, in a row.
    var fruitlessRechecks = 0
    /// The last interval deviated from the model: re-read the CRTC once the ticks are out.
    var recheckPending = false
    /// A mode change was read while the old mode's vblanks may still come: they are held back
    /// (neither ticked nor learned) until one leaves the old grid.
    var modeSetTail: ModeSetTail?
    /// The kernel refused vblank events for the display although it is on (EPERM, or another
    /// error some drivers give): retried once a second, predicted meanwhile for those who asked.
    var vblankRefused = false
    /// Ticks come from the model, not from vblanks: off, or refused.
    var isPredicting: Bool { state == .off || vblankRefused }
    /// Whether vblank events run all the time or in bursts (`--vblank-sampling`), and where
    /// the bursts are (Display+Sampling.swift).
    var sampling: VBlankSampling
    /// Its record on the timing page (TimingPage.claimSlot), -1 for none.
    var pageSlot: Int32 = -1
    /// The record flags of the last full write (`Server.publishTiming`), which a vblank's write
    /// repeats: they need the model's residuals and the primary, too dear for every vblank.
    var pageFlags: UInt32 = 0
    /// The earliest pacing wake among its subscriptions (see Server+Pacing.swift).
    var nextWakeNs: UInt64?
    /// When VRR_ENABLED was last polled (Display+VariableRefresh.swift).
    var variableRefreshPolledNs: UInt64 = 0
    /// Changes the daemon made: mode, off, on, model resets (`resetModel`, `turnedOff`).
    private var changes: UInt32 = 0
    /// The model's restarts on a new phase while the display was followed without a break
    /// (`phaseMoved`).
    private var phaseMoves: UInt32 = 0
    /// What the model's own restarts add to the generation: each on a new period (one it saw
    /// before the mode was re-read), and each on a new phase the daemon counted.
    private var modelRestarts: UInt32 { UInt32(truncatingIfNeeded: model.periodRestartCount) &+ phaseMoves }
    /// The configuration generation every tick and display record carries (protocol 4): bumps
    /// exactly once per change of mode, on/off or model reset, including the model's own
    /// restarts (`modelRestarts`; not a new phase after an idle spell, which changes nothing a
    /// client was told), so a client detects any change with one comparison. Wraps.
    var generation: UInt32 { changes &+ modelRestarts }

    static let fallbackPeriodNs = 1e9 / 60

    init(id: UInt32, source: SourceDisplay, sampling: VBlankSampling.Mode = .continuous) {
        self.id = id
        self.sampling = VBlankSampling(mode: sampling)
        self.source = source
        litSource = source.isActive ? source : nil
        self.state = source.isActive ? .on : .off
        self.model = RefreshModel(nominalPeriodNs: source.refresh?.periodNanoseconds ?? Self.fallbackPeriodNs)
    }

    var key: DisplayKey { source.key }

    /// The refresh rate used for rate mapping: the mode's exact rate, else the model's estimate.
    var refreshHz: Double { source.refresh?.hertz ?? model.refreshHz }

    var periodNs: UInt64 { UInt64(model.periodNs.rounded()) }

    var wantsVBlank: Bool { isFollowed && (sampling.wantsVBlank || holdsInterrupt) }

    /// A running subscription asked for hardware ticks: vblank events stay on whatever the
    /// sampling (protocol 6).
    var holdsInterrupt: Bool { sampling.mode == .sparse && subscriptions.contains { !$0.paused && $0.hardwareTicks } }

    /// On, with a running subscriber: vblank events, or in sparse sampling the model, tick it.
    var isFollowed: Bool { state == .on && subscriptions.contains { !$0.paused } }

    /// Adds `sub` in send order. Ticks go out in this order, each send taking a few µs, so
    /// appending would let a user with many subscriptions put all of them ahead of another
    /// user's one. Ranked instead by how many its user already has here: every user's first
    /// subscription is sent before anyone's second (ranks are not renumbered on removal; the
    /// order stays close to fair and never starves anyone).
    func insertFairly(_ sub: Subscription) {
        let uid = sub.client.uid
        sub.fairRank = subscriptions.reduce(0) { $0 + ($1.client.uid == uid ? 1 : 0) }
        let at = subscriptions.firstIndex { $0.fairRank > sub.fairRank } ?? subscriptions.endIndex
        subscriptions.insert(sub, at: at)
    }

    /// The display went dark: one generation.
    func turnedOff() { changes &+= 1 }

    /// The model started over on a new phase after vblanks it was waiting for stopped (a
    /// suspend the vblanks show, or a stalled CRTC): the grid moved under the display's
    /// followers, one generation. After an idle spell (events off) it is not called: the model
    /// catching up with a grid nobody was told of is no change.
    func phaseMoved() { phaseMoves &+= 1 }

    /// The model's restarts as of the previous read of the source for this display.
    private var restartsAtLastRead: UInt32 = 0
    /// The model restarted (`modelRestarts`) since the previous read: a mode change this read
    /// finds is the change it saw (a late read full of the new mode's vblanks restarts the model
    /// before the CRTC is re-read after them), and the restart's bump stands for it. Only
    /// during `Server.apply`: a later reset is another change.
    private var restartedSinceLastRead = false

    /// The source was read for this display; what it says is being applied until `applied()`.
    func sourceRead() {
        restartedSinceLastRead = modelRestarts != restartsAtLastRead
        restartsAtLastRead = modelRestarts
    }

    func applied() { restartedSinceLastRead = false }

    /// Starts the model over for a new mode (or after a suspend, or on again): one generation,
    /// unless the model's own restart already counted this change (`restartedSinceLastRead`).
    func resetModel() {
        if restartedSinceLastRead { restartedSinceLastRead = false } else { changes &+= 1 }
        model.reset(nominalPeriodNs: source.refresh?.periodNanoseconds ?? Self.fallbackPeriodNs)
        modeSetTail = nil
        sampling.relearn()
        newestIsCurrent = false
        fruitlessRechecks = 0
        // Some drivers restart the vblank count with a mode: frames are aimed afresh from the
        // next real vblank, not after a count that may not come again.
        for sub in subscriptions { sub.pacer = FramePacer() }
    }

    /// Resets the model for a mode change read while the display stayed on; the vblanks on the
    /// old grid that may still come are the old mode's tail.
    func resetModelForNewMode(now: UInt64) {
        let last = model.newest
        let oldPeriod = model.periodNs
        resetModel()
        guard let last else { return }
        modeSetTail = ModeSetTail(
            oldPeriodNs: oldPeriod, newPeriodNs: model.nominalPeriodNs, lastSequence: last.sequence, lastTimestampNs: last.timestampNs,
            readNs: now)
    }

    /// True if the vblank belongs to the old mode's tail: not to be ticked. The first that does
    /// not ends the tail.
    func isInModeSetTail(sequence: UInt64, timestampNs: UInt64) -> Bool {
        guard var tail = modeSetTail else { return false }
        let held = tail.holds(sequence: sequence, timestampNs: timestampNs)
        modeSetTail = held ? tail : nil
        return held
    }

    func info(isPrimary: Bool, synthetic: Bool) -> DisplayInfo {
        var flags: DisplayFlags = synthetic ? .synthetic : .hardwareClock
        if isPrimary { flags.insert(.primary) }
        var timing = model.displayTiming
        timing.timing.phaseCorrectionNs = UInt32(clamping: sampling.largestCorrectionNs)
        flags.formUnion(timing.flags)
        flags.formUnion(variableRefreshFlags)
        if isModelTimed { flags.insert(.modelTimed) }
        let intervals = variableRefreshIntervals
        return DisplayInfo(
            displayID: id, crtcID: source.key.crtcID, connectorID: source.connectorID,
            state: state, flags: flags,
            refreshMillihertz: state == .on ? (source.refresh?.millihertz ?? 0) : 0,
            periodNs: state == .on ? intervalNs : 0,  // the shortest while VRR is on
            width: source.width, height: source.height,
            connectorName: source.connectorName, deviceName: source.deviceName,
            busPath: source.busPath, edidMake: source.edid?.make ?? "", edidModel: source.edid?.model ?? "",
            edidSerial: source.edid?.serial ?? "", generation: generation, timing: timing.timing,
            minIntervalNs: intervals.shortestNs, maxIntervalNs: intervals.longestNs)
    }
}
