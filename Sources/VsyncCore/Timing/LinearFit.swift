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
        let frames = frameIndices(samples)
        var acc = LineAccumulator()
        for (s, x) in zip(samples, frames) {
            acc.add(x: x, y: signedDelta(s.timestampNs, first.timestampNs))
        }
        guard var line = acc.line, line.slope > 0, line.slope.isFinite else { return nil }
        func residuals() -> [Double] {
            zip(samples, frames).map { s, x in
                signedDelta(s.timestampNs, first.timestampNs) - (line.interceptAtZero + line.slope * x)
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
        if shape.fitsEnvelope {
            // The envelope wants x strictly increasing: sort by sequence, drop repeats.
            var kept: [(x: Double, y: Double)] = []
            let latest = high + 0.05 * (high - low)
            for ((s, x), r) in zip(zip(samples, frames), residualsNs) where r <= latest {
                kept.append((x, signedDelta(s.timestampNs, first.timestampNs)))
            }
            kept.sort { $0.x < $1.x }
            var xs: [Double] = []
            var ys: [Double] = []
            for k in kept where xs.last.map({ k.x > $0 }) ?? true {
                xs.append(k.x)
                ys.append(k.y)
            }
            var lowerStack = Array(repeating: 0, count: xs.count)
            var upperStack = lowerStack
            let envelope =
                shape == .flat
                ? EnvelopeFit.minimax(
                    count: xs.count, lowerStack: &lowerStack, upperStack: &upperStack,
                    x: { xs[$0] }, y: { ys[$0] })
                : EnvelopeFit.lower(count: xs.count, stack: &lowerStack, x: { xs[$0] }, y: { ys[$0] })
            if let envelope {
                line = envelope
                residualsNs = residuals()
            }
        }
        let source: TimestampSource = shape.isInterrupt ? .interrupt : .scanout
        return LinearFit(
            periodNs: line.slope, referenceSequence: first.sequence,
            referenceTimestampNs: first.timestampNs, offsetNs: line.interceptAtZero,
            residualsNs: residualsNs, timestampSource: source)
    }

    /// Each sample's frame number relative to the first, as the timestamps count frames. The
    /// kernel's count is used, except where it slipped: with interrupt-time stamps the kernel
    /// cannot tell a late interrupt from a lost one, and after a stall of over a frame it may
    /// count one vblank where two went by (the test bed with `drm.timestamp_precision_usec=0`:
    /// +1 in the count across 33.3 ms at 60 Hz). A step whose interval is off from the count by
    /// 3/4 of a frame or more, followed by a normal interval (so not merely one late stamp), is
    /// taken at the timestamps' count. Samples out of sequence order keep the kernel's count.
    static func frameIndices(_ samples: [(sequence: UInt64, timestampNs: UInt64)]) -> [Double] {
        guard let first = samples.first, let last = samples.last else { return [] }
        let plain = samples.map { signedDelta($0.sequence, first.sequence) }
        let count = signedDelta(last.sequence, first.sequence)
        let span = signedDelta(last.timestampNs, first.timestampNs)
        guard samples.count >= 3, count > 0, span > 0,
            zip(samples, samples.dropFirst()).allSatisfy({ $0.sequence < $1.sequence && $0.timestampNs < $1.timestampNs })
        else { return plain }
        let period = span / count  // off by the slips over the run: a fraction of a % at most
        func deviation(_ i: Int) -> (steps: Double, off: Double) {
            let steps = signedDelta(samples[i].sequence, samples[i - 1].sequence)
            return (steps, signedDelta(samples[i].timestampNs, samples[i - 1].timestampNs) / period - steps)
        }
        var frames = [0.0]
        for i in 1..<samples.count {
            var (step, off) = deviation(i)
            if abs(off) >= 0.75, i + 1 < samples.count, abs(deviation(i + 1).off) < 0.5 {
                step = Swift.max(1, step + off.rounded())
            }
            frames.append(frames[i - 1] + step)
        }
        return frames
    }
}
