import Glibc

/// CLOCK_MONOTONIC, the clock of vsyncd's tick timestamps, for deadlines and latencies.
public enum Monotonic {
    public static var nanoseconds: UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    public static var seconds: Double { Double(nanoseconds) / 1e9 }
}

/// One clear line: what failed, why, what to do.
public struct ToolError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}
