/// One-pass least squares of y against x (Welford's updates), so no sums of huge squares are
/// ever formed: callers pass x and y already taken relative to a reference sample, so both
/// stay small enough for a Double to hold to well under a nanosecond.
struct LineAccumulator {
    private(set) var n = 0
    private(set) var meanX = 0.0
    private(set) var meanY = 0.0
    private var sxx = 0.0  // Σ (x - meanX)²
    private var sxy = 0.0  // Σ (x - meanX)(y - meanY)

    mutating func add(x: Double, y: Double) {
        n += 1
        let dx = x - meanX
        meanX += dx / Double(n)
        meanY += (y - meanY) / Double(n)
        sxx += dx * (x - meanX)
        sxy += dx * (y - meanY)
    }

    /// Slope and the fitted y at x = 0; nil with fewer than two distinct x.
    var line: (slope: Double, interceptAtZero: Double)? {
        guard n >= 2, sxx > 0 else { return nil }
        let slope = sxy / sxx
        return (slope, meanY - slope * meanX)
    }
}

/// Signed difference of two UInt64 values as a Double, exact while |a - b| < 2⁵³.
@inline(__always)
func signedDelta(_ a: UInt64, _ b: UInt64) -> Double {
    Double(Int64(bitPattern: a &- b))
}

/// `base + offset` for a ns offset, clamped to 0…UInt64.max.
@inline(__always)
func offsetTimestamp(_ base: UInt64, by offset: Double) -> UInt64 {
    let rounded = offset.rounded()
    guard rounded.isFinite else { return rounded > 0 ? .max : 0 }
    if rounded >= 0 {
        guard rounded < 1.8e19 else { return .max }
        let (sum, overflow) = base.addingReportingOverflow(UInt64(rounded))
        return overflow ? .max : sum
    }
    guard -rounded < 1.8e19 else { return 0 }
    let back = UInt64(-rounded)
    return back > base ? 0 : base - back
}
