/// Notices a system suspend from two clock readings: CLOCK_MONOTONIC stops while the machine
/// sleeps, CLOCK_BOOTTIME does not, and nothing else moves one against the other (NTP slews
/// both alike). So their difference grows by exactly the time asleep.
///
/// Fed one pair per source read, it reports each suspend once, on the first reading after it:
/// the daemon then resets every display's model once, rather than let each model find out
/// from its vblanks (a restart, or outliers and re-reads) display by display.
public struct SuspendDetector: Sendable {
    /// A jump smaller than this is not a suspend (reading the two clocks is not atomic; a
    /// preempted reader sees microseconds, never 100 ms).
    public static let thresholdNs: UInt64 = 100_000_000

    private var lastOffsetNs: UInt64?
    /// Suspends seen so far.
    public private(set) var suspendCount: UInt64 = 0

    public init() {}

    /// The time asleep since the last reading, if it was a suspend; nil otherwise (and on the
    /// first reading).
    public mutating func check(monotonicNs: UInt64, boottimeNs: UInt64) -> UInt64? {
        let offset = boottimeNs &- monotonicNs
        defer { lastOffsetNs = offset }
        guard let last = lastOffsetNs, offset > last, offset - last >= Self.thresholdNs else { return nil }
        suspendCount += 1
        return offset - last
    }
}
