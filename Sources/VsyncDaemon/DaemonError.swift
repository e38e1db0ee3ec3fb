import Glibc

/// A failure that stops vsyncd, as the one line it prints.
public struct DaemonError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// CLOCK_MONOTONIC now, ns: the clock of every vblank timestamp.
func monotonicNow() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

func errnoText(_ code: Int32 = errno) -> String { String(cString: strerror(code)) }
