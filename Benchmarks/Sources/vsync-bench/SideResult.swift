import Histogram

/// One side's figures for one (clients, rate) cell: vsyncd + DisplayLink, or the C reference.
struct SideResult: Codable {
    var p50Us: Double
    var p99Us: Double
    /// The 99.9th percentile: with `maxUs`, the column where a stall of tens of ms shows.
    var p999Us: Double?
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
    /// vsyncd only: clients that got a first tick before the run (a cell where some did not
    /// measured fewer clients than it names, and fails).
    var clientsLive: Int?
    /// Sender's voluntary context switches per tick (it blocked: about one per wake-up).
    var wakeupsPerTick: Double?
    /// Sender's nonvoluntary context switches per tick (preempted, mostly by clients it woke).
    var preemptionsPerTick: Double?
    /// vsyncd only: sum of the `skipped` counts the clients saw.
    var skipped: UInt64?
    var notes: [String]
    /// DisplayLink clients only: p50 from the vblank to the reader thread's read of the tick;
    /// `p50Us` minus this is the hop from the reader to the callback.
    var readP50Us: Double? = nil
}

/// HDR histogram percentiles in µs, the definition both sides use.
extension Histogram where Count == UInt64 {
    static func latency() -> Histogram<UInt64> {
        Histogram<UInt64>(lowestDiscernibleValue: 1, highestTrackableValue: 60_000_000_000, numberOfSignificantValueDigits: .three)
    }
    func microseconds(atPercentile p: Double) -> Double { Double(valueAtPercentile(p)) / 1000 }
}

extension SideResult {
    /// One figure per side from several rounds of the same cell: the median of the typical
    /// figures (p50, p99, CPU per tick, switches per tick), the largest of the extremes (max, RSS),
    /// and the sum of the counts (samples, ticks, lost, skipped). A single round is returned as is.
    static func combining(_ rounds: [SideResult]) -> SideResult? {
        guard let first = rounds.first else { return nil }
        guard rounds.count > 1 else { return first }
        func median(_ values: [Double]) -> Double {
            let s = values.sorted()
            return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
        }
        func medianOfPresent(_ values: [Double?]) -> Double? {
            let present = values.compactMap { $0 }
            return present.isEmpty ? nil : median(present)
        }
        var notes: [String] = []
        for note in rounds.flatMap(\.notes) where !notes.contains(note) { notes.append(note) }
        let skipped = rounds.compactMap(\.skipped)
        return SideResult(
            p50Us: median(rounds.map(\.p50Us)), p99Us: median(rounds.map(\.p99Us)),
            p999Us: rounds.compactMap(\.p999Us).max(),
            maxUs: rounds.map(\.maxUs).max() ?? 0,
            samples: rounds.reduce(0) { $0 + $1.samples }, lost: rounds.reduce(0) { $0 + $1.lost },
            cpuNsPerTick: median(rounds.map(\.cpuNsPerTick)), rssMiB: rounds.map(\.rssMiB).max() ?? 0,
            ticks: rounds.reduce(0) { $0 + $1.ticks }, clientsReporting: rounds.map(\.clientsReporting).min() ?? 0,
            clientsLive: rounds.compactMap(\.clientsLive).min(),
            wakeupsPerTick: medianOfPresent(rounds.map(\.wakeupsPerTick)),
            preemptionsPerTick: medianOfPresent(rounds.map(\.preemptionsPerTick)),
            skipped: skipped.isEmpty ? nil : skipped.reduce(0, +), notes: notes,
            readP50Us: medianOfPresent(rounds.map(\.readP50Us)))
    }
}
