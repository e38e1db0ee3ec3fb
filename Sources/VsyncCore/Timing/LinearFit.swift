/// A least-squares line through a whole run of (sequence, timestamp) samples:
/// `timestamp ≈ referenceTimestampNs + offsetNs + periodNs · (sequence − referenceSequence)`.
///
/// Made by `RefreshModel.fit(_:)`; `vsync-probe measure` uses it for the measured rate and
/// takes jitter percentiles from `residualsNs`. No outlier rejection: every sample counts.
public struct LinearFit: Sendable, Hashable {
    /// Fitted frame period in ns.
    public let periodNs: Double
    /// The first sample's sequence and timestamp: the values are fitted relative to them.
    public let referenceSequence: UInt64
    public let referenceTimestampNs: UInt64
    /// Fitted timestamp at `referenceSequence`, minus `referenceTimestampNs`.
    public let offsetNs: Double
    /// Each sample's timestamp minus the fitted line, in input order (ns, signed).
    public let residualsNs: [Double]

    /// Fitted refresh rate in Hz.
    public var hz: Double { 1e9 / periodNs }

    /// Root mean square of the residuals, ns.
    public var rmsResidualNs: Double {
        guard !residualsNs.isEmpty else { return 0 }
        return (residualsNs.reduce(0) { $0 + $1 * $1 } / Double(residualsNs.count)).squareRoot()
    }

    /// The line's timestamp for a sequence.
    public func predictedTimestamp(forSequence sequence: UInt64) -> UInt64 {
        offsetTimestamp(
            referenceTimestampNs,
            by: offsetNs + periodNs * signedDelta(sequence, referenceSequence))
    }
}

extension RefreshModel {
    /// Least-squares fit of timestamp against sequence over all `samples`.
    /// Nil with fewer than two distinct sequences, or if time does not advance with sequence.
    public static func fit(_ samples: [(sequence: UInt64, timestampNs: UInt64)]) -> LinearFit? {
        guard let first = samples.first else { return nil }
        var acc = LineAccumulator()
        for s in samples {
            acc.add(x: signedDelta(s.sequence, first.sequence), y: signedDelta(s.timestampNs, first.timestampNs))
        }
        guard let line = acc.line, line.slope > 0, line.slope.isFinite else { return nil }
        let residuals = samples.map { s in
            signedDelta(s.timestampNs, first.timestampNs)
                - (line.interceptAtZero + line.slope * signedDelta(s.sequence, first.sequence))
        }
        return LinearFit(
            periodNs: line.slope, referenceSequence: first.sequence,
            referenceTimestampNs: first.timestampNs, offsetNs: line.interceptAtZero,
            residualsNs: residuals)
    }
}
