// ClockPair is in ClockPair.swift (the protocol carries it too, so libvsync compiles it).

/// A fitted vblank grid on CLOCK_REALTIME's time line: what displays on
/// several machines whose wall clocks agree (PTP) need to align their content.
///
/// The phase is given as the wall-clock time of one vblank on the grid, not as a remainder
/// modulo the period since the epoch: 1.8·10¹⁸ ns hold ~10¹¹ periods, so that remainder would
/// need the period to 10⁻¹² to mean anything. Two displays of period P compare their
/// `vblankNs` as `(T1 − T2) mod P`, which is exact for times close together.
public struct RealtimePhase: Sendable, Hashable, Encodable {
    /// CLOCK_REALTIME − CLOCK_MONOTONIC at the end of the run, ns.
    public var offsetNs: Int64
    /// The last vblank of the run on the fitted grid, on CLOCK_REALTIME (ns since the epoch).
    public var vblankNs: UInt64
    /// The grid's period measured on CLOCK_REALTIME, ns.
    public var periodNs: Double
    /// How fast the grid moves against CLOCK_REALTIME, relative to the mode's nominal rate, ppm
    /// (positive: vblanks come sooner than the mode says). Equals `measure`'s ppm unless the wall
    /// clock was stepped or slewed apart from CLOCK_MONOTONIC during the run.
    public var driftPpm: Double
    /// CLOCK_REALTIME's rate against CLOCK_MONOTONIC over the run, ppm (0 unless stepped or
    /// slewed apart: both follow NTP's and PTP's frequency corrections).
    public var realtimeVsMonotonicPpm: Double

    /// Nil when the pairs do not span time, or the fit has no period.
    public init?(fit: LinearFit, lastSequence: UInt64, nominalPeriodNs: Double, start: ClockPair, end: ClockPair) {
        guard end.monotonicNs > start.monotonicNs, fit.periodNs > 0, nominalPeriodNs > 0 else { return nil }
        let span = Double(end.monotonicNs - start.monotonicNs)
        let slew = Double(end.offsetNs - start.offsetNs) / span
        let last = fit.predictedTimestamp(forSequence: lastSequence)
        // Map from the end's pair (nearest to the last vblank): integers for the 10¹⁸-ns part.
        let sinceEnd = signedDelta(last, end.monotonicNs)
        offsetNs = end.offsetNs
        vblankNs = offsetTimestamp(last &+ UInt64(bitPattern: end.offsetNs), by: sinceEnd * slew)
        periodNs = fit.periodNs * (1 + slew)
        driftPpm = (nominalPeriodNs / periodNs - 1) * 1e6
        realtimeVsMonotonicPpm = slew * 1e6
    }
}
