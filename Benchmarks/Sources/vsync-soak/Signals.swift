import Glibc

/// Signals taken synchronously: blocked in every thread, then collected by `wait` as the
/// process's sleep, so SIGTERM/SIGINT end a loop cleanly without a handler touching state.
enum Signals {
    /// Blocks `signals` in the calling thread; threads started afterwards inherit the mask, so
    /// call this first thing, before Dispatch starts any.
    static func block(_ signals: [Int32]) -> sigset_t {
        var set = sigset_t()
        sigemptyset(&set)
        for s in signals { sigaddset(&set, s) }
        pthread_sigmask(SIG_BLOCK, &set, nil)
        return set
    }

    /// Sleeps up to `seconds`; returns the blocked signal that arrived, or nil on timeout.
    static func wait(_ set: sigset_t, seconds: Double) -> Int32? {
        var set = set
        let clamped = max(0, seconds)
        var timeout = timespec(tv_sec: Int(clamped), tv_nsec: Int((clamped - clamped.rounded(.down)) * 1e9))
        let signo = sigtimedwait(&set, nil, &timeout)
        return signo > 0 ? signo : nil
    }
}
