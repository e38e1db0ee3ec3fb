import Glibc

/// CLOCK_MONOTONIC, the clock vsyncd's timestamps are on.
enum MonotonicClock {
    static func nanoseconds() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    static func seconds(_ ns: UInt64) -> Double { Double(ns) / 1e9 }
}
