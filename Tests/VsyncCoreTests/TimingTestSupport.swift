import Foundation  // log, cos
import TestSupport
@testable import VsyncCore

/// Every random stream in these tests is seeded (TestSupport.SplitMix64), so it is the same
/// on every run and every machine: a bound that holds once holds always.
extension SplitMix64 {
    /// Uniform in (0, 1]: never 0, so log() in Box–Muller stays finite.
    mutating func unitInterval() -> Double {
        Double((next() >> 11) + 1) / Double(1 << 53)
    }

    /// Standard normal by Box–Muller (one of the pair; simplicity over speed).
    mutating func gaussian() -> Double {
        let u1 = unitInterval(), u2 = unitInterval()
        return (-2 * log(u1)).squareRoot() * cos(2 * Double.pi * u2)
    }
}

/// A CLOCK_MONOTONIC-like base far from zero, so a model that put raw nanoseconds into a
/// Double (53-bit mantissa: 128 ns steps near 1e18) would fail the nanosecond bounds.
let farTimestampBase: UInt64 = 1_000_000_000_000_000_000
/// Sequences far from zero for the same reason.
let farSequenceBase: UInt64 = 1 << 40

/// The ideal time of vblank `sequence` on a display with `periodNs`, first vblank
/// (`firstSequence`) at `base`, plus `noiseNs`; rounded to the nanosecond as the kernel does.
func vblankTime(_ sequence: UInt64, firstSequence: UInt64 = farSequenceBase, base: UInt64 = farTimestampBase,
                periodNs: Double, noiseNs: Double = 0) -> UInt64 {
    let offset = Double(sequence - firstSequence) * periodNs + noiseNs
    return UInt64(Int64(bitPattern: base) + Int64(offset.rounded()))
}

/// Σ(x − x̄)² for N consecutive sequences: the denominator of the least-squares slope.
/// A slope's standard error is σ / √(this).
func consecutiveSxx(_ n: Int) -> Double {
    let n = Double(n)
    return n * (n * n - 1) / 12
}

/// Worst-case slope error from residuals bounded by `e`: e · Σ|x − x̄| / Σ(x − x̄)², for N
/// consecutive sequences.
func worstSlopeError(n: Int, residualBound e: Double) -> Double {
    let mean = Double(n - 1) / 2
    let absSum = (0..<n).reduce(0.0) { $0 + abs(Double($1) - mean) }
    return e * absSum / consecutiveSxx(n)
}

let period60Hz = 1e9 / 60
let period144Hz = 1e9 / 144
