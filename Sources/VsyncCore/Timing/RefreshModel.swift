/// The vblank timing model of one CRTC, after Android's VSyncPredictor.
///
/// Fed every (sequence, kernel timestamp) pair, it fits `timestamp = phase + period · sequence`
/// by least squares over a sliding window of accepted samples, and predicts the next vblanks.
///
/// - Until `minimumSamplesForFit` samples are in, the period is the prior (the mode's nominal
///   period, or the period carried over a phase restart) anchored on the newest sample.
///   After, the fit's period is taken only within `periodAgreement` of the prior and over three
///   standard errors from it; else the phase is fitted on the prior (the mode's period is a
///   fact; a short window of jittery stamps is not).
/// - A sample whose residual against the current prediction exceeds `outlierFraction` of the
///   period is rejected (`.outlier`) and kept out of the fit.
/// - `restartRun` consecutive rejected samples that fit a line among themselves mean the
///   display changed under us (a mode change nobody reported): the model restarts from them,
///   on their period if it is `outlierFraction` or more off the prior (`periodRestartCount`),
///   else on the prior period at their phase (while still learning, with fewer than
///   `minimumSamplesForFit` accepted, that is no restart: the few accepted were late stamps).
/// - Timestamps the kernel took at interrupt time rather than scanout (a driver without
///   `get_vblank_timestamp`, or `drm.timestamp_precision_usec=0`) are late by the interrupt
///   latency: one-sided, often a millisecond. Once the window's residuals are large and
///   skewed late or flat (`TimestampSource.interrupt`, `ResidualShape`), the period and phase
///   come from the window's envelope instead (`EnvelopeFit`): the vblanks stamped soonest lie
///   on the grid. Outliers are still judged against the least-squares line, as before.
/// - A rejected sample after a long gap (over `longGapNs` in time or in sequence) means the
///   clock or the counter jumped (suspend/resume): the phase restarts at once, keeping the
///   period. A long gap that agrees with the period is simply accepted.
///
/// Cost per sample: one O(window) refit with no allocation (the window is a ring buffer
/// allocated once): three passes over the window (means, sums, residual moments), about
/// 1.3 µs a sample at window 120 built with -O on the loaded 2-core build machine; on an
/// interrupt-stamped display the envelope's hull passes bring it to 4-5 µs (measured with a
/// -O build of these files fed 200 000 exact, exponential-latency and host-tick samples).
/// Timestamps are taken relative to the newest sample before they become Doubles, so
/// nanosecond precision holds for any CLOCK_MONOTONIC value.
public struct RefreshModel: Sendable {
    /// The window's capacity in samples.
    public let window: Int
    /// The period the caller gave (`init` or `reset`).
    public private(set) var nominalPeriodNs: Double
    /// The fitted line, the one state a prediction reads (`predictedTimestamp`).
    public internal(set) var line: RefreshLine
    /// The current period estimate, ns. Stored, so a read from another module is a field's.
    public private(set) var periodNs: Double { didSet { line.periodNs = periodNs } }
    /// Vblanks never seen: the sum of sequence gaps between consecutive samples (stale and
    /// duplicate ones excluded). Kept across `reset`; the first sample after a reset opens
    /// no gap. A caller that stopped asking on purpose will see that pause counted here.
    public private(set) var missedVblanks: UInt64 = 0
    /// Samples rejected as outliers, in total.
    public private(set) var outlierCount: UInt64 = 0
    /// Times the model restarted by itself (display change or clock jump), in total.
    public private(set) var restartCount: UInt64 = 0
    /// Of those, restarts on a new period (a run of agreeing outliers on another mode's period),
    /// not a new phase (after a gap, or a run on the same period): a configuration change.
    public private(set) var periodRestartCount: UInt64 = 0
    /// What the timestamps' spread says they are. Kept across `reset` (it is the driver's
    /// habit, not the mode's) and judged again once `minimumSamplesForSpread` are in.
    public var timestampSource: TimestampSource { shape.isInterrupt ? .interrupt : .scanout }
    private var shape = ResidualShape.centered

    private var priorPeriodNs: Double
    // Ring buffer of accepted samples; `head` is the next slot to write.
    private var sequences: [UInt64]
    private var timestamps: [UInt64]
    private var head = 0
    // `count` and the line's reference point and offset live in `line` (RefreshLine.swift).
    // The least-squares line (the same as the fitted one unless the envelope is used):
    // outliers are judged against it, as before the envelope existed.
    private var centerPeriodNs: Double
    private var centerOffsetNs = 0.0
    private var hullStack: [Int]
    private var upperHullStack: [Int]
    private var scratchX: [Double]
    private var scratchY: [Double]
    private var lastSeen: UInt64?
    /// The newest timestamp seen. Kept across `reset`: a driver may restart the count with a
    /// mode, but CLOCK_MONOTONIC never goes back, so this is what keeps a vblank from counting
    /// twice across a reset (the kernel flushes the old mode's last event after the new mode is
    /// readable).
    private var lastSeenNs: UInt64?
    // Consecutive rejected samples, oldest first.
    private var runSequences: [UInt64]
    private var runTimestamps: [UInt64]
    private var runCount = 0

    public init(nominalPeriodNs: Double, window: Int = 120) {
        precondition(nominalPeriodNs > 0 && nominalPeriodNs.isFinite, "RefreshModel needs a positive period")
        self.window = Swift.max(window, Self.minimumSamplesForFit)
        self.nominalPeriodNs = nominalPeriodNs
        self.priorPeriodNs = nominalPeriodNs
        self.periodNs = nominalPeriodNs
        self.line = RefreshLine(periodNs: nominalPeriodNs)
        self.centerPeriodNs = nominalPeriodNs
        hullStack = Array(repeating: 0, count: self.window)
        upperHullStack = Array(repeating: 0, count: self.window)
        scratchX = Array(repeating: 0, count: self.window)
        scratchY = Array(repeating: 0, count: self.window)
        sequences = Array(repeating: 0, count: self.window)
        timestamps = Array(repeating: 0, count: self.window)
        runSequences = Array(repeating: 0, count: Self.restartRun)
        runTimestamps = Array(repeating: 0, count: Self.restartRun)
    }

    /// Accepted samples in the window.
    public var sampleCount: Int { count }
    /// True once the period comes from the fit rather than the prior.
    public var isFitted: Bool { count >= Self.minimumSamplesForFit }
    /// The current refresh estimate, Hz.
    public var refreshHz: Double { 1e9 / periodNs }

    /// The newest vblank fed (by `add`, or by `addUnfitted` while variable refresh is on): the
    /// daemon's one copy of it. Nil before the first and after `reset` (a driver may restart
    /// the count with a mode), though its timestamp still judges duplicates.
    public var newest: (sequence: UInt64, timestampNs: UInt64)? {
        guard let lastSeen, let lastSeenNs else { return nil }
        return (lastSeen, lastSeenNs)
    }

    /// Takes a vblank as the newest without fitting it (variable refresh: its intervals are
    /// not the display's period, and would look like mode changes). False, changing nothing,
    /// for the kernel repeating itself or an old event: a timestamp within
    /// `minimumIntervalNs` of the newest seen, or older, as `add` judges.
    public mutating func addUnfitted(sequence: UInt64, timestampNs: UInt64) -> Bool {
        if let lastSeenNs, timestampNs < lastSeenNs &+ Self.minimumIntervalNs { return false }
        lastSeenNs = timestampNs
        lastSeen = sequence
        return true
    }

    /// The vblank after the newest accepted sample and its predicted time: a display link's
    /// `targetTimestamp`. Nil before the first sample.
    public var next: (sequence: UInt64, timestampNs: UInt64)? {
        guard count > 0 else { return nil }
        return (refSeq &+ 1, predictedTimestamp(forSequence: refSeq &+ 1))
    }

    /// The fitted time of a vblank (past or future). 0 before the first sample.
    public func predictedTimestamp(forSequence sequence: UInt64) -> UInt64 {
        line.predictedTimestamp(forSequence: sequence)
    }

    /// Root mean square residual of the window's samples against the fit, ns (0 with < 2).
    /// Against the lower envelope on an interrupt-stamped display: how late the stamps are.
    public var jitterNs: Double {
        guard count >= 2 else { return 0 }
        var sum = 0.0
        for i in 0..<count {
            let r = fittedResidual(sequences[i], timestamps[i])
            sum += r * r
        }
        return (sum / Double(count)).squareRoot()
    }

    /// Each sample in the window against the fitted line, oldest first, ns. Allocates: for
    /// reports (`quality`), not for the tick path.
    public var residualsNs: [Double] {
        (0..<count).map { k in
            let i = (head - count + k + window) % window
            return fittedResidual(sequences[i], timestamps[i])
        }
    }

    /// Starts over for a mode change: forgets the samples, the fit and the last sequence (the
    /// count may restart), keeps the counters and the newest timestamp.
    public mutating func reset(nominalPeriodNs: Double) {
        precondition(nominalPeriodNs > 0 && nominalPeriodNs.isFinite, "RefreshModel needs a positive period")
        self.nominalPeriodNs = nominalPeriodNs
        clear(priorPeriodNs: nominalPeriodNs)
        lastSeen = nil
    }

    /// Takes a vblank `add` already saw and rejected as the first sample after `reset`: the
    /// caller re-read the mode because of it, and found it the new mode's first vblank.
    public mutating func seed(sequence: UInt64, timestampNs: UInt64) {
        guard count == 0 else { return }
        lastSeen = sequence
        lastSeenNs = Swift.max(lastSeenNs ?? 0, timestampNs)
        push(sequence, timestampNs)
    }

    /// Moves the fitted grid by `deltaNs`, keeping its period and every sample's weight: the
    /// display's phase moved while vblank events were off (a driver whose vblank timer restarts
    /// on each enable) but its clock did not, so the window is still good evidence of the rate.
    public mutating func reanchor(byNs deltaNs: Int64) {
        guard count > 0 else { return }
        let shift = UInt64(bitPattern: deltaNs)
        for i in 0..<count { timestamps[(head - 1 - i + window) % window] &+= shift }
        refTs &+= shift
        runCount = 0
    }

    /// Feeds one vblank.
    @discardableResult
    public mutating func add(sequence: UInt64, timestampNs: UInt64) -> Verdict {
        // The one duplicate check on the tick path: a vblank is ticked once, never twice.
        if let lastSeen, sequence <= lastSeen { return sequence == lastSeen ? .duplicate : .stale }
        if let lastSeenNs, timestampNs < lastSeenNs &+ Self.minimumIntervalNs {
            return timestampNs &+ Self.minimumIntervalNs <= lastSeenNs ? .stale : .duplicate
        }
        lastSeenNs = timestampNs
        if let lastSeen {
            if sequence > lastSeen {
                // Saturating: a garbage sequence must not trap the daemon.
                let (sum, overflow) = missedVblanks.addingReportingOverflow(sequence - lastSeen - 1)
                missedVblanks = overflow ? .max : sum
                self.lastSeen = sequence
            }
        } else {
            lastSeen = sequence
        }
        guard count > 0 else {
            push(sequence, timestampNs)
            return .accepted
        }
        if abs(residual(sequence, timestampNs)) <= Self.outlierFraction * periodNs {
            runCount = 0
            push(sequence, timestampNs)
            return .accepted
        }
        let gapNs = signedDelta(timestampNs, refTs)
        let gapFrames = signedDelta(sequence, refSeq)
        let longGap = Swift.max(Self.longGapNs, 30 * periodNs)
        if gapNs > longGap || gapFrames * periodNs > longGap {
            // Clock or counter jumped (suspend/resume): new phase, same period.
            clear(priorPeriodNs: periodNs)
            push(sequence, timestampNs)
            restartCount += 1
            return .restarted
        }
        outlierCount += 1
        return addToRun(sequence, timestampNs)
    }

    // MARK: - Internals

    private func agreesWithPrior(_ period: Double) -> Bool { abs(period - priorPeriodNs) <= Self.periodAgreement * priorPeriodNs }

    private func predictedOffset(_ sequence: UInt64) -> Double { line.predictedOffset(sequence) }

    /// Against the least-squares line: what outliers are judged by.
    private func residual(_ sequence: UInt64, _ timestamp: UInt64) -> Double {
        signedDelta(timestamp, refTs) - (centerOffsetNs + centerPeriodNs * signedDelta(sequence, refSeq))
    }

    private func fittedResidual(_ sequence: UInt64, _ timestamp: UInt64) -> Double {
        signedDelta(timestamp, refTs) - predictedOffset(sequence)
    }

    private mutating func clear(priorPeriodNs: Double) {
        self.priorPeriodNs = priorPeriodNs
        periodNs = priorPeriodNs
        centerPeriodNs = priorPeriodNs
        centerOffsetNs = 0
        head = 0
        count = 0
        runCount = 0
        offsetNs = 0
    }

    private mutating func push(_ sequence: UInt64, _ timestamp: UInt64) {
        sequences[head] = sequence
        timestamps[head] = timestamp
        head = (head + 1) % window
        count = Swift.min(count + 1, window)
        refit(newestSequence: sequence, newestTimestamp: timestamp)
    }

    private mutating func refit(newestSequence: UInt64, newestTimestamp: UInt64) {
        refSeq = newestSequence
        refTs = newestTimestamp
        offsetNs = 0
        periodNs = priorPeriodNs
        centerOffsetNs = 0
        centerPeriodNs = priorPeriodNs
        guard count >= Self.minimumSamplesForFit else { return }
        // Two passes (means, then centered sums) with no division in the loop: this runs on
        // every vblank of every CRTC.
        var sumX = 0.0
        var sumY = 0.0
        for i in 0..<count {
            sumX += signedDelta(sequences[i], refSeq)
            sumY += signedDelta(timestamps[i], refTs)
        }
        let meanX = sumX / Double(count)
        let meanY = sumY / Double(count)
        var sxx = 0.0
        var sxy = 0.0
        var syy = 0.0
        for i in 0..<count {
            let dx = signedDelta(sequences[i], refSeq) - meanX
            let dy = signedDelta(timestamps[i], refTs) - meanY
            sxx += dx * dx
            sxy += dx * dy
            syy += dy * dy
        }
        guard sxx > 0 else { return }
        let slope = sxy / sxx
        // The window may refine the known period, not replace it: a slope further off is a
        // window its stamps' error biased, and one within three standard errors of it is one
        // that cannot tell itself from it. Either way the phase is fitted on the known period.
        let slopeVariance = Swift.max(0, syy - slope * sxy) / Double(count - 2) / sxx
        let known = slope - priorPeriodNs
        if slope > 0, slope.isFinite, agreesWithPrior(slope), known * known > 9 * slopeVariance { periodNs = slope }
        offsetNs = meanY - periodNs * meanX
        centerPeriodNs = periodNs
        centerOffsetNs = offsetNs
        if count >= Self.minimumSamplesForSpread { judgeSpread() }
        guard shape.fitsEnvelope else { return }
        // The window in order, oldest first, as Doubles: the hull reads each point several times.
        var i = (head - count + window) % window
        for k in 0..<count {
            scratchX[k] = signedDelta(sequences[i], refSeq)
            scratchY[k] = signedDelta(timestamps[i], refTs)
            i = i + 1 == window ? 0 : i + 1
        }
        let (xs, ys) = (scratchX, scratchY)
        let envelope =
            shape == .flat
            ? EnvelopeFit.minimax(
                count: count, lowerStack: &hullStack, upperStack: &upperHullStack,
                x: { xs[$0] }, y: { ys[$0] })
            : EnvelopeFit.lower(count: count, stack: &hullStack, x: { xs[$0] }, y: { ys[$0] })
        if let line = envelope, agreesWithPrior(line.slope) {
            periodNs = line.slope
            offsetNs = line.interceptAtZero
        }
    }

    /// Residual moments against the least-squares line: large and skewed late means the
    /// kernel stamped the interrupt, not scanout. Hysteresis keeps the verdict from flapping.
    private mutating func judgeSpread() {
        var moments = ResidualMoments()
        for i in 0..<count { moments.add(residual(sequences[i], timestamps[i])) }
        if shape == .centered {
            shape = moments.shape(entering: true) ?? .centered
            return
        }
        // Interrupt-stamped: the shape may turn (skewed ↔ flat, or wide to either) by the
        // entering thresholds, but it leaves only by the looser ones. A window of one-sided
        // latency that merely looks wide (its tail trimmed as outliers) keeps the envelope.
        if moments.shape(entering: false) == .centered {
            shape = .centered
        } else if let now = moments.shape(entering: true), now.fitsEnvelope || !shape.fitsEnvelope, now != .centered {
            shape = now
        }
    }

    /// Adds a rejected sample to the run of consecutive rejects; restarts from the run when
    /// it is long enough and its samples agree on a line of their own.
    private mutating func addToRun(_ sequence: UInt64, _ timestamp: UInt64) -> Verdict {
        if runCount > 0, sequence <= runSequences[runCount - 1] { runCount = 0 }
        runSequences[runCount] = sequence
        runTimestamps[runCount] = timestamp
        runCount += 1
        guard runCount == Self.restartRun else { return .outlier }

        var acc = LineAccumulator()
        let s0 = runSequences[0]
        let t0 = runTimestamps[0]
        for i in 0..<runCount {
            acc.add(x: signedDelta(runSequences[i], s0), y: signedDelta(runTimestamps[i], t0))
        }
        if let line = acc.line, line.slope > 0, line.slope.isFinite {
            let tolerance = Self.outlierFraction * line.slope
            let agree = (0..<runCount).allSatisfy { i in
                let fitted = line.interceptAtZero + line.slope * signedDelta(runSequences[i], s0)
                return abs(signedDelta(runTimestamps[i], t0) - fitted) <= tolerance
            }
            if agree {
                // Six stamps agreeing within 20 % of a period may lie on a line 10 % off it: only
                // 20 % off (another mode; Android's VSyncPredictor clears at the same) is a new
                // period. Nearer, the phase moved and the period is kept, as after a gap; while
                // still learning that is only a better start than a stamp or two that came late.
                let newPeriod = abs(line.slope - priorPeriodNs) >= Self.outlierFraction * priorPeriodNs
                let learning = count < Self.minimumSamplesForFit
                // `clear` and `push` leave the run's storage alone, so it can be read while pushing.
                clear(priorPeriodNs: newPeriod ? line.slope : periodNs)
                for i in 0..<Self.restartRun { push(runSequences[i], runTimestamps[i]) }
                if learning && !newPeriod { return .accepted }
                restartCount += 1
                if newPeriod { periodRestartCount += 1 }
                return .restarted
            }
        }
        // No agreement: slide the run by one and keep waiting.
        for i in 1..<runCount {
            runSequences[i - 1] = runSequences[i]
            runTimestamps[i - 1] = runTimestamps[i]
        }
        runCount -= 1
        return .outlier
    }
}
