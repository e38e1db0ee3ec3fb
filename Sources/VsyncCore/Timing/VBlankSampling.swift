/// How vblank events are sampled on one CRTC: all the time, or, once the refresh model can be
/// trusted, in short bursts with the ticks between them timed from the model.
///
/// While a vblank event is queued on a CRTC the kernel keeps its vblank interrupt on, which
/// keeps a laptop panel out of self-refresh and the package out of its deep idle states. The
/// model (`RefreshModel`) predicts scanout-stamped vblanks to well under a microsecond a
/// second ahead, so between bursts the daemon can leave the interrupt off and tick from it,
/// as Android's SurfaceFlinger does once its VSyncPredictor is good.
///
/// Why the numbers (`boundNs`, `burstIntervalNs`): a display's crystal is off its nominal rate
/// by ±50–100 ppm, but the model measures the actual rate, so what remains is the rate's
/// wander, about 1 ppm per °C, plus the fit's own error (about 0.1 ppm over a window of
/// scanout stamps with µs noise). Allowing 10 ppm, a fast 10 °C swing inside one interval,
/// a 2 s interval drifts at most 20 µs: `boundNs`. At 60 Hz a burst of three vblanks keeps
/// the interrupt on for about four periods (the enable and the last event's put), 67 ms of
/// every 2 s: 3.3 %.
///
/// A burst is three vblank events. The first after the enable is dropped (`Decision.drop`):
/// vkms stamps it off the grid its restarted timer then keeps (measured in the VM test bed:
/// 3-8 ms off the next ones). The second is judged against the prediction before anything is
/// ticked from it; off by more than the bound, the grid is re-anchored on it at once
/// (`Decision.reanchor`), keeping the period: some drivers (vkms, virtio-gpu) restart their
/// vblank timer relative to the enable, so the phase moves at every burst although the rate
/// does not. The third must then agree with the re-anchored grid within the bound; one that
/// does not sends the display back to continuous sampling until the model is confident again.
/// Until the burst's judged vblank, ticks stay model-timed.
///
/// The interrupt can also go off and on while events are wanted: a reader descheduled for
/// longer than its queue of requests lasts (a busy machine, a guest on a loaded host) leaves the
/// kernel no reference, and it turns the interrupt off. On vkms the phase then moves just as it
/// does between bursts, so the daemon reports the re-queue (`requeued`): while learning, the next
/// vblank re-anchors the grid instead of spreading the model's residuals (which kept the model
/// from being confident for seconds); in a burst, the burst starts over instead of failing. The
/// timestamps alone still decide: a vblank off the re-anchored grid sends the display back to
/// continuous sampling, however late it was read.
///
/// Pure: the daemon feeds it vblanks, the model's readings and the clock.
public struct VBlankSampling: Sendable, Equatable {
    public enum Mode: String, Sendable, CaseIterable {
        /// Vblank events whenever someone follows the display (the interrupt stays on).
        case continuous
        /// Bursts once the model is confident; ticks from the model between them.
        case sparse
    }

    public enum State: Sendable, Equatable {
        /// Vblank events on without a break: the model learns, or cannot be trusted.
        case continuous
        /// Vblank events on for `remaining` more vblanks to feed the model, after `settling`
        /// more to drop; `judged` once the first fed was compared with the prediction.
        case burst(remaining: Int, judged: Bool, settling: Int)
        /// Vblank events off: ticks come from the model until the burst due at `nextBurstNs`.
        case asleep(nextBurstNs: UInt64)
    }

    /// What the model says of itself after a vblank, for `fed`.
    public struct ModelReading: Sendable, Equatable {
        public var sampleCount: Int
        public var jitterNs: Double
        /// The kernel stamps at interrupt time, not scanout: late by a variable latency.
        public var interruptStamped: Bool
        /// Variable refresh is on: there is no grid to predict.
        public var variable: Bool

        public init(sampleCount: Int, jitterNs: Double, interruptStamped: Bool, variable: Bool) {
            self.sampleCount = sampleCount
            self.jitterNs = jitterNs
            self.interruptStamped = interruptStamped
            self.variable = variable
        }

        /// Good enough to predict `burstIntervalNs` ahead within `boundNs`.
        public var isConfident: Bool {
            !interruptStamped && !variable && sampleCount >= VBlankSampling.confidentSamples
                && jitterNs <= VBlankSampling.confidentJitterNs
        }
    }

    /// What to do with a vblank before it is fed to the model (`judge`).
    public enum Decision: Sendable, Equatable {
        case feed
        /// The first vblank after the enable: neither fed to the model nor ticked.
        case drop
        /// Shift the model's grid by this many ns first (`RefreshModel.reanchor`).
        case reanchor(Int64)
    }

    /// How far a model-timed tick may be from the kernel's vblank.
    public static let boundNs: Int64 = 20_000
    /// Between bursts.
    public static let burstIntervalNs: UInt64 = 2_000_000_000
    /// Vblanks of a burst fed to the model: the first measures the phase, the other confirms.
    public static let burstLength = 2
    /// Vblanks dropped at the start of a burst, before those (see the type's comment).
    public static let settlingVBlanks = 1
    /// Samples before the model is trusted: enough for the residuals' spread to tell scanout
    /// stamps from interrupt ones (`RefreshModel.minimumSamplesForSpread`).
    public static let confidentSamples = RefreshModel.minimumSamplesForSpread
    /// RMS residual the model must be within: scanout stamps are within a few µs.
    public static let confidentJitterNs = 5_000.0

    public let mode: Mode
    public private(set) var state: State = .continuous
    /// The largest phase difference a burst's first vblank found since the display last
    /// sampled continuously, ns (absolute value).
    public private(set) var largestCorrectionNs: UInt64 = 0
    /// Corrections over the bound, in total (each re-anchored the grid).
    public private(set) var correctionCount: UInt64 = 0
    /// Sampling continuously: the vblank requests ran out and were queued afresh (`requeued`),
    /// so the next vblank is judged for a moved phase before it is fed.
    public private(set) var rephasePending = false
    /// Sent back to continuous sampling by a burst's vblank off the grid: the model may still
    /// read as confident (one vblank is an outlier, not a restart), so events stay on until a
    /// vblank lands within the bound of its prediction.
    public private(set) var awaitingAgreement = false

    public init(mode: Mode) { self.mode = mode }

    /// Vblank events must be on (continuous, or in a burst).
    public var wantsVBlank: Bool {
        if case .asleep = state { return false }
        return true
    }

    /// Ticks come from the model now.
    public var isModelTimed: Bool { !wantsVBlank }

    /// When the next burst is due, while asleep.
    public var nextBurstNs: UInt64? {
        if case .asleep(let at) = state { return at }
        return nil
    }

    /// Judges a real vblank against the model's prediction for its sequence (nil: no model
    /// yet) before it is fed. Only a burst's first vblank may move the grid.
    public mutating func judge(timestampNs: UInt64, predictedNs: UInt64?) -> Decision {
        if state == .continuous {
            if awaitingAgreement, let predictedNs, predictedNs > 0,
                Int64(bitPattern: timestampNs &- predictedNs).magnitude <= UInt64(Self.boundNs)
            {
                awaitingAgreement = false
            }
            return rephase(timestampNs: timestampNs, predictedNs: predictedNs)
        }
        guard case .burst(let remaining, let judged, let settling) = state, let predictedNs else { return .feed }
        if settling > 0 {
            state = .burst(remaining: remaining, judged: judged, settling: settling - 1)
            return .drop
        }
        let error = Int64(bitPattern: timestampNs &- predictedNs)
        let size = error.magnitude
        if !judged {
            state = .burst(remaining: remaining, judged: true, settling: 0)
            largestCorrectionNs = max(largestCorrectionNs, size)
            guard size > UInt64(Self.boundNs) else { return .feed }
            correctionCount &+= 1
            return .reanchor(error)
        }
        // A later vblank of the burst off the re-anchored grid: the rate is not what the model
        // says (or the mode changed). Learn again without a break.
        if size > UInt64(Self.boundNs) {
            relearn()
            awaitingAgreement = true
        }
        return .feed
    }

    /// The first vblank after a re-queue while learning: off the grid by more than the bound
    /// but by less than half a period (a restarted timer's new phase; the count rounds to the
    /// nearest vblank), the grid moves onto it. More is not a phase move: the model judges it.
    private mutating func rephase(timestampNs: UInt64, predictedNs: UInt64?) -> Decision {
        guard rephasePending, let predictedNs, predictedNs > 0 else { return .feed }
        rephasePending = false
        let error = Int64(bitPattern: timestampNs &- predictedNs)
        guard error.magnitude > UInt64(Self.boundNs), error.magnitude < Self.halfPeriodLimitNs else { return .feed }
        correctionCount &+= 1
        return .reanchor(error)
    }

    /// Half of the longest period there is (24 Hz): the most a restarted timer can move a phase.
    static let halfPeriodLimitNs: UInt64 = 20_900_000

    /// The display's vblank requests ran out while its events were on and were queued afresh
    /// (the daemon read late: a busy machine, a descheduled guest). The kernel may have turned
    /// the interrupt off and on in between, and a driver whose vblank timer restarts on enable
    /// (vkms, virtio-gpu) then stamps on a new phase. That is the reader's lateness, not the
    /// display's: it must neither spread the model's residuals (learning would never end) nor
    /// fail a burst, nor tick several frames on the old phase before the model's outlier run
    /// moves it. Sampling continuously (either mode): the next vblank is judged and re-anchors
    /// the grid if it moved. In a burst: the burst starts over, all its vblanks queued at once.
    /// Returns true when the queue must be topped up to `queueDepth` now.
    public mutating func requeued() -> Bool {
        switch state {
        case .continuous:
            rephasePending = true
            return false
        case .burst:
            state = .burst(remaining: Self.burstLength, judged: false, settling: Self.settlingVBlanks)
            return true
        case .asleep:
            return false  // no request is queued while asleep
        }
    }

    /// The vblank was fed; `reading` is the model after it. Returns true when vblank events
    /// should now stop (the model is confident and the burst, if any, is done).
    public mutating func fed(at timestampNs: UInt64, reading: ModelReading) -> Bool {
        guard mode == .sparse else { return false }
        guard reading.isConfident else {
            relearn()
            return false
        }
        switch state {
        case .continuous:
            guard !awaitingAgreement else { return false }
            state = .asleep(nextBurstNs: timestampNs &+ Self.burstIntervalNs)
            return true
        case .burst(let remaining, let judged, _):
            guard remaining <= 1 else {
                state = .burst(remaining: remaining - 1, judged: judged, settling: 0)
                return false
            }
            state = .asleep(nextBurstNs: timestampNs &+ Self.burstIntervalNs)
            return true
        case .asleep:
            return false  // an event that was in flight when events stopped
        }
    }

    /// How many vblank requests to keep in flight: in a burst, the vblanks it still wants,
    /// all queued when it starts (every queued request holds the interrupt on until its vblank
    /// and none can be cancelled, so more would outlast the burst; topped up one at a time, a
    /// late reader's queue would run dry, dropping the kernel's last reference: a driver that
    /// disables at once turns the interrupt off and on again, and vkms's phase moves); nil,
    /// the source's own depth, while sampling continuously, which a late reader needs.
    public var queueDepth: Int? {
        if case .burst(let remaining, _, let settling) = state { return max(1, remaining + settling) }
        return nil
    }

    /// In a burst, before the vblank it judges: ticks stay model-timed.
    public var isSettling: Bool {
        if case .burst(_, let judged, _) = state { return !judged }
        return false
    }

    /// Whether the burst is due at `nowNs`; if so it starts (vblank events must go on).
    public mutating func startBurstIfDue(nowNs: UInt64) -> Bool {
        guard case .asleep(let at) = state, nowNs >= at else { return false }
        state = .burst(remaining: Self.burstLength, judged: false, settling: Self.settlingVBlanks)
        return true
    }

    /// A burst now (a new subscriber, a display event): the model is checked against real
    /// vblanks before it times ticks again. Returns true when vblank events must go on.
    public mutating func requestBurst() -> Bool {
        guard case .asleep = state else { return false }
        state = .burst(remaining: Self.burstLength, judged: false, settling: Self.settlingVBlanks)
        return true
    }

    /// The model cannot be trusted (it starts over: a mode change, resume, hotplug; or it is
    /// off the kernel): vblank events without a break until it is confident again.
    public mutating func relearn() {
        largestCorrectionNs = 0
        state = .continuous
    }
}
