/// Maps a client's requested frame rate to a whole divisor of the display's refresh.
///
/// A client at divisor d gets refresh/d ticks per second, on the vblanks whose sequence is a
/// multiple of d (`isTickDue`), so clients at the same rate tick on the same vblank.
///
/// Rules, in order (CADisplayLink's `preferredFrameRateRange` semantics, Android's divisors):
/// 1. The candidates are refresh/d for d = 1, 2, … while refresh/d ≥ 1 Hz
///    (at 60 Hz: 60, 30, 20, 15, 12, 10, …, 1).
/// 2. A rate within 0.0009 relative of a candidate counts as that candidate exactly
///    (`divisorTolerance`, Android's): 29.97 on a 59.94 Hz display is d = 2. The same tolerance
///    applies to the range's bounds.
/// 3. The range is [minimum, maximum]; maximum 0 means no upper bound. The default range
///    (0, 0, 0) and preferred 0 with no bounds give d = 1, the display's maximum.
/// 4. If some candidates lie inside the range: with preferred > 0, the one nearest preferred
///    (so a preferred rate above the refresh gives the refresh); with preferred 0, the highest.
/// 5. If none lies inside the range: the one nearest the range.
/// 6. Ties go to the higher rate.
/// `preferredFramesPerSecond` n is the range (0, 0, n); n ≤ 0 means the maximum.
///
/// | refresh Hz | request (min, max, preferred) or fps | d | delivered Hz |
/// | --- | --- | --- | --- |
/// | 60 | fps 0 | 1 | 60 |
/// | 60 | fps 90 | 1 | 60 |
/// | 60 | fps 26 … fps 35 | 2 | 30 |
/// | 60 | fps 25 (30 and 20 tie) | 2 | 30 |
/// | 60 | fps 24 | 3 | 20 |
/// | 60 | fps 45 (60 and 30 tie) | 1 | 60 |
/// | 60 | fps 1 | 60 | 1 |
/// | 60 | (15, 30, 24) | 3 | 20 |
/// | 60 | (10, 25, 0) | 3 | 20 |
/// | 60 | (80, 120, 0): nothing inside | 1 | 60 |
/// | 60 | (40, 50, 45): nothing inside, 60 and 30 tie | 1 | 60 |
/// | 59.94 | fps 30 | 2 | 29.97 |
/// | 59.94 | (29.97, 29.97, 29.97) | 2 | 29.97 |
/// | 120 | fps 60 / 40 / 24 | 2 / 3 / 5 | 60 / 40 / 24 |
/// | 144 | fps 60 (72 and 48 tie) | 2 | 72 |
/// | 144 | fps 30 | 5 | 28.8 |
/// | 144 | (0, 60, 0) | 3 | 48 |
/// | 75 | fps 30 | 3 | 25 |
/// | 75 | fps 60 | 1 | 75 |
public enum RateMapping {
    /// Relative tolerance within which a rate counts as refresh/d exactly (Android's 0.0009).
    public static let divisorTolerance = 0.0009
    /// The lowest rate a divisor may deliver.
    public static let minimumDeliveredHz = 1.0

    /// The largest divisor considered at `refreshHz` (refresh/d ≥ 1 Hz), at least 1.
    public static func maximumDivisor(refreshHz: Double) -> UInt32 {
        guard refreshHz.isFinite, refreshHz >= 2 * minimumDeliveredHz else { return 1 }
        return UInt32(Swift.min((refreshHz / minimumDeliveredHz).rounded(.down), 100_000))
    }

    /// The divisor for `preferredFramesPerSecond` (0 or less: the maximum).
    public static func divisor(preferredFramesPerSecond fps: Int, refreshHz: Double) -> UInt32 {
        divisor(for: FrameRateRange(preferredFramesPerSecond: fps), refreshHz: refreshHz)
    }

    /// The divisor for a frame-rate range. A non-positive or non-finite refresh gives 1.
    public static func divisor(for range: FrameRateRange, refreshHz: Double) -> UInt32 {
        guard refreshHz.isFinite, refreshHz > 0 else { return 1 }
        let minimum = Double(range.minimum)
        let maximum = range.maximum > 0 ? Double(range.maximum) : Double.infinity
        let preferred = Double(range.preferred)
        let tieMargin = 1e-9 * refreshHz

        func same(_ rate: Double, _ target: Double) -> Bool {
            abs(rate - target) <= divisorTolerance * rate
        }
        // 0 inside the range, else how far outside.
        func distanceToRange(_ rate: Double) -> Double {
            if rate < minimum && !same(rate, minimum) { return minimum - rate }
            if rate > maximum && !same(rate, maximum) { return rate - maximum }
            return 0
        }

        var best: UInt32 = 1
        var bestInside = false
        var bestDistance = Double.infinity
        for d in 1...maximumDivisor(refreshHz: refreshHz) {
            let rate = refreshHz / Double(d)
            let outside = distanceToRange(rate)
            if outside == 0 {
                // Inside: nearest preferred, or the highest (the first) with preferred 0.
                let distance = preferred > 0 ? (same(rate, preferred) ? 0 : abs(rate - preferred)) : 0
                if !bestInside || distance < bestDistance - tieMargin {
                    best = d
                    bestInside = true
                    bestDistance = distance
                }
            } else if !bestInside, outside < bestDistance - tieMargin {
                best = d
                bestDistance = outside
            }
            // Rates only fall from here: once below the minimum nothing later is closer.
            if rate < minimum && outside > 0 { break }
            if bestInside && preferred > 0 && rate < preferred { break }
        }
        return best
    }

    /// Whether a client at `divisor` ticks on vblank `sequence`: on multiples of the divisor.
    public static func isTickDue(sequence: UInt64, divisor: UInt32) -> Bool {
        divisor <= 1 || sequence % UInt64(divisor) == 0
    }

    /// The rate a divisor delivers.
    public static func deliveredHz(refreshHz: Double, divisor: UInt32) -> Double {
        refreshHz / Double(Swift.max(divisor, 1))
    }
}
