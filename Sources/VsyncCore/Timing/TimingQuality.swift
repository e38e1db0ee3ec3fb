/// How a display's kernel timestamps were taken, as their spread tells it (nothing in the
/// kernel's API says).
public enum TimestampSource: String, Sendable, Hashable, Codable {
    /// The start of scanout, from the driver's scanout position: within a few µs of the grid.
    case scanout
    /// The interrupt handler's `ktime_get()` (a driver without `get_vblank_timestamp`, or
    /// `drm.timestamp_precision_usec=0`): late by the interrupt latency, one-sided.
    case interrupt

    /// The verdict on residuals against a least-squares line (no hysteresis). Nil with fewer
    /// than `RefreshModel.minimumSamplesForSpread`.
    public static func judge(residualsNs r: [Double]) -> TimestampSource? {
        var m = ResidualMoments()
        for v in r { m.add(v) }
        return m.shape(entering: true).map { $0.isInterrupt ? .interrupt : .scanout }
    }
}

/// The shape of a window's residuals about its least-squares line, from their moments.
enum ResidualShape {
    /// Scanout stamps: small, or symmetric and tailed like noise. Least squares is right.
    case centered
    /// A late tail (skewness ≥ 1): interrupt latency piling up near its floor.
    case skewedLate
    /// Bounded and flat (kurtosis ≤ 2.1 and a range within 4 RMS; a uniform spread has 1.8
    /// and 3.5, Gaussian noise 3 and about 5): the stamp is the first timer tick after the vblank.
    case flat
    /// Neither, but wider than any scanout stamp (`RefreshModel.interruptOnlySpreadNs`):
    /// interrupt latency that varies about its mean without a tail. The stamps are the
    /// interrupt's, but least squares is still the better fit of such a spread (the lower
    /// envelope of a symmetric spread rests on its few earliest stamps).
    case wide

    /// The stamps are taken at interrupt time.
    var isInterrupt: Bool { self != .centered }
    /// The grid is the residuals' lower envelope (one-sided error with a floor), not their
    /// least-squares line.
    var fitsEnvelope: Bool { self == .skewedLate || self == .flat }
}

struct ResidualMoments {
    private var n = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0, s4 = 0.0
    private var low = Double.infinity, high = -Double.infinity

    mutating func add(_ r: Double) {
        n += 1
        s1 += r
        low = Swift.min(low, r)
        high = Swift.max(high, r)
        let r2 = r * r
        s2 += r2
        s3 += r2 * r
        s4 += r2 * r2
    }

    /// The shape, or nil with too few residuals. `entering` false applies the looser
    /// thresholds for staying interrupt-stamped (hysteresis: half the spread, skewness 0.5,
    /// kurtosis 2.5), so the verdict does not flap.
    func shape(entering: Bool) -> ResidualShape? {
        guard n >= Double(RefreshModel.minimumSamplesForSpread) else { return nil }
        let mean = s1 / n
        // Central moments from raw ones: the residuals are already centred by the fit, so the
        // mean is ~0 and nothing cancels.
        let m2 = s2 / n - mean * mean
        let m3 = s3 / n - 3 * mean * s2 / n + 2 * mean * mean * mean
        let m4 = s4 / n - 4 * mean * s3 / n + 6 * mean * mean * s2 / n - 3 * mean * mean * mean * mean
        guard m2 > 0 else { return .centered }
        let rms = m2.squareRoot()
        let skewness = m3 / (m2 * rms)
        let kurtosis = m4 / (m2 * m2)
        let scale = entering ? 1.0 : 0.5
        guard rms >= RefreshModel.interruptSpreadNs * scale else { return .centered }
        if skewness >= RefreshModel.interruptSkewness * scale { return .skewedLate }
        // Flat: a uniform spread has kurtosis 1.8 and spans √12 ≈ 3.5 RMS; 120 Gaussian
        // residuals span about 5 RMS and rarely reach kurtosis 2.1, never both.
        if entering ? kurtosis <= 2.1 && high - low <= 4 * rms : kurtosis <= 2.5 { return .flat }
        if rms >= RefreshModel.interruptOnlySpreadNs * scale { return .wide }
        return .centered
    }
}

/// A display's timing quality: its timestamps against the model's line.
public struct TimingQuality: Sendable, Hashable {
    /// Root mean square residual, ns.
    public var rmsNs: Double
    /// 99th percentile (nearest rank) of |residual|, ns.
    public var p99Ns: Double
    public var timestampSource: TimestampSource

    public init(residualsNs: [Double], timestampSource: TimestampSource) {
        rmsNs =
            residualsNs.isEmpty
            ? 0 : (residualsNs.reduce(0) { $0 + $1 * $1 } / Double(residualsNs.count)).squareRoot()
        p99Ns = Percentiles(residualsNs.map(abs))?.p99 ?? 0
        self.timestampSource = timestampSource
    }
}

extension RefreshModel {
    /// The window's timing quality. Sorts the window: for reports, not for every vblank.
    public var quality: TimingQuality {
        TimingQuality(residualsNs: residualsNs, timestampSource: timestampSource)
    }

    /// What a display record says of the timing: the residuals in whole ns over the window's
    /// samples, and the interrupt flag only once the spread has been judged (before
    /// `minimumSamplesForSpread` the verdict kept from an earlier mode still stands: it is the
    /// driver's habit). Sorts the window: for display records, not for ticks.
    public var displayTiming: (timing: DisplayTiming, flags: DisplayFlags) {
        let q = quality
        func ns(_ v: Double) -> UInt32 { v.isFinite ? UInt32(clamping: Int64(v.rounded())) : .max }
        return (
            DisplayTiming(rmsNs: ns(q.rmsNs), p99Ns: ns(q.p99Ns), samples: UInt32(clamping: sampleCount)),
            q.timestampSource == .interrupt ? .interruptTimestamps : []
        )
    }
}
