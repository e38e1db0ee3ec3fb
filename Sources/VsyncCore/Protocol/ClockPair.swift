/// A CLOCK_MONOTONIC reading and the CLOCK_REALTIME reading taken with it.
public struct ClockPair: Sendable, Hashable {
    public var monotonicNs: UInt64
    public var realtimeNs: UInt64

    public init(monotonicNs: UInt64, realtimeNs: UInt64) {
        self.monotonicNs = monotonicNs
        self.realtimeNs = realtimeNs
    }

    /// CLOCK_REALTIME − CLOCK_MONOTONIC, ns.
    public var offsetNs: Int64 { Int64(bitPattern: realtimeNs &- monotonicNs) }

    /// The tightest of `tries` samples: realtime read between two monotonic reads, paired with
    /// their midpoint, keeping the sample whose monotonic reads were closest (the least chance
    /// that a preemption came between). The clocks are read by the caller's functions, so this
    /// stays free of syscalls (vsync-probe and vsyncd pass clock_gettime).
    public static func tightest(tries: Int = 5, monotonic: () -> UInt64, realtime: () -> UInt64) -> ClockPair {
        var best = ClockPair(monotonicNs: 0, realtimeNs: 0)
        var width = UInt64.max
        for _ in 0..<max(1, tries) {
            let a = monotonic()
            let r = realtime()
            let b = monotonic()
            if b &- a < width {
                width = b &- a
                best = ClockPair(monotonicNs: a &+ (b &- a) / 2, realtimeNs: r)
            }
        }
        return best
    }
}
