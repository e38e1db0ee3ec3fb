import Glibc

// The daemon's one clock reader. CLOCK_MONOTONIC is the clock of every vblank timestamp,
// tick and paced wake; CLOCK_REALTIME is read only for a display event's clock pair and
// CLOCK_BOOTTIME only to notice a suspend. (The client side reads CLOCK_MONOTONIC in its own
// place: CVsyncSys's `vsync_sys_now_ns` for the client core and libvsync, DisplayLink's
// `MonotonicClock`.)

/// Clock `id` now, ns.
@inline(__always)
func clockNow(_ id: clockid_t) -> UInt64 {
    var ts = timespec()
    clock_gettime(id, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

/// CLOCK_MONOTONIC now, ns.
@inline(__always)
func monotonicNow() -> UInt64 { clockNow(CLOCK_MONOTONIC) }
