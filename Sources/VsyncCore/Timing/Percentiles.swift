/// p50 / p99 / max of a sample, by the nearest-rank method.
///
/// Nearest rank: the p-th percentile of n sorted values is the value at 1-based rank
/// ⌈p/100 · n⌉ (rank 1 for p = 0). It is always one of the sample's values, never an
/// interpolation, so "p99 = 412 µs" means some frame really took 412 µs.
/// For signed residuals (jitter), pass magnitudes: `residuals.map(abs)`.
public struct Percentiles: Sendable, Hashable, Codable {
    public let count: Int
    public let min: Double
    public let p50: Double
    public let p99: Double
    public let max: Double

    /// Nil for an empty sample. NaNs are dropped first; nil if nothing is left.
    public init?(_ values: [Double]) {
        let sorted = values.filter { !$0.isNaN }.sorted()
        guard !sorted.isEmpty else { return nil }
        count = sorted.count
        min = sorted[0]
        p50 = Self.nearestRank(50, sorted: sorted)
        p99 = Self.nearestRank(99, sorted: sorted)
        max = sorted[sorted.count - 1]
    }

    /// The nearest-rank `percent`-th percentile (0…100) of an ascending, non-empty array.
    public static func nearestRank(_ percent: Double, sorted: [Double]) -> Double {
        precondition(!sorted.isEmpty, "nearestRank of an empty sample")
        let p = Swift.min(Swift.max(percent, 0), 100)
        // p·n first: exact for whole p and n, so p99 of 100 values is rank 99, not 100.
        let rank = Int((p * Double(sorted.count) / 100).rounded(.up))
        return sorted[Swift.min(Swift.max(rank, 1), sorted.count) - 1]
    }
}
