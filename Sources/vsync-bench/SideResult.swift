import Histogram

/// One side's figures for one (clients, rate) cell: vsyncd + DisplayLink, or the C reference.
struct SideResult: Codable {
    var p50Us: Double
    var p99Us: Double
    var maxUs: Double
    /// Latency samples (callbacks, or C receipts) in the measured window.
    var samples: UInt64
    /// Ticks missing at a client's divisor among the ones it received (must be 0 for clients that keep up).
    var lost: UInt64
    /// Sender (vsyncd or the C sender) CPU per tick, ns: CPU time over the window / ticks in it.
    var cpuNsPerTick: Double
    /// Peak sender RSS in the window, MiB.
    var rssMiB: Double
    /// Ticks the sender produced in the window.
    var ticks: UInt64
    /// Clients that reported, of those started.
    var clientsReporting: Int
    /// Sender's voluntary context switches per tick (it blocked: about one per wake-up).
    var wakeupsPerTick: Double?
    /// Sender's nonvoluntary context switches per tick (preempted, mostly by clients it woke).
    var preemptionsPerTick: Double?
    /// vsyncd only: sum of the `skipped` counts the clients saw.
    var skipped: UInt64?
    var notes: [String]
}

/// HDR histogram percentiles in µs, the definition both sides use.
extension Histogram where Count == UInt64 {
    static func latency() -> Histogram<UInt64> {
        Histogram<UInt64>(lowestDiscernibleValue: 1, highestTrackableValue: 60_000_000_000, numberOfSignificantValueDigits: .three)
    }
    func microseconds(atPercentile p: Double) -> Double { Double(valueAtPercentile(p)) / 1000 }
}
