/// A least-squares line through a whole run of (sequence, timestamp) samples:
/// `timestamp ≈ referenceTimestampNs + offsetNs + periodNs · (sequence − referenceSequence)`.
///
/// Made by `RefreshModel.fit(_:)`; `vsync-probe measure` uses it for the measured rate and
/// takes jitter percentiles from `residualsNs`. No outlier rejection: every sample counts.
/// On interrupt-stamped timestamps (`timestampSource`) the line is the envelope, as in the
/// daemon's `RefreshModel` (drawn without stamps far later than the rest, which a whole run
/// does not reject), and the residuals are how late each stamp was.
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
    /// What the spread of the residuals around the least-squares line says.
    public let timestampSource: TimestampSource

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
        guard var line = acc.line, line.slope > 0, line.slope.isFinite else { return nil }
        func residuals() -> [Double] {
            samples.map { s in
                signedDelta(s.timestampNs, first.timestampNs)
                    - (line.interceptAtZero + line.slope * signedDelta(s.sequence, first.sequence))
            }
        }
        var residualsNs = residuals()
        // A whole run keeps every sample, so a stall's odd stamp stays in: the shape is judged
        // without the 1 % latest and earliest, and the envelope drawn without stamps later
        // than the rest by over 5 % of their spread (the soonest ones are the envelope itself).
        let sorted = residualsNs.sorted()
        let trim = sorted.count / 100
        let (low, high) = (sorted[trim], sorted[sorted.count - 1 - trim])
        var moments = ResidualMoments()
        for r in sorted[trim..<(sorted.count - trim)] { moments.add(r) }
        let shape = moments.shape(entering: true) ?? .centered
        if shape != .centered {
            // The envelope wants x strictly increasing: sort by sequence, drop repeats.
            var kept: [(sequence: UInt64, timestampNs: UInt64)] = []
            let latest = high + 0.05 * (high - low)
            for (s, r) in zip(samples, residualsNs) where r <= latest { kept.append(s) }
            let ordered = kept.sorted { $0.sequence < $1.sequence }
            var xs: [Double] = [], ys: [Double] = []
            for s in ordered where xs.last.map({ signedDelta(s.sequence, first.sequence) > $0 }) ?? true {
                xs.append(signedDelta(s.sequence, first.sequence))
                ys.append(signedDelta(s.timestampNs, first.timestampNs))
            }
            var lowerStack = Array(repeating: 0, count: xs.count), upperStack = lowerStack
            let envelope = shape == .flat
                ? EnvelopeFit.minimax(count: xs.count, lowerStack: &lowerStack, upperStack: &upperStack,
                                      x: { xs[$0] }, y: { ys[$0] })
                : EnvelopeFit.lower(count: xs.count, stack: &lowerStack, x: { xs[$0] }, y: { ys[$0] })
            if let envelope {
                line = envelope
                residualsNs = residuals()
            }
        }
        let source: TimestampSource = shape == .centered ? .scanout : .interrupt
        return LinearFit(
            periodNs: line.slope, referenceSequence: first.sequence,
            referenceTimestampNs: first.timestampNs, offsetNs: line.interceptAtZero,
            residualsNs: residualsNs, timestampSource: source)
    }
}
