import CLinux
import Glibc

/// A CLOCK_MONOTONIC timerfd. Owns its fd.
final class TimerFD {
    let fd: FileDescriptor

    init() throws(DaemonError) {
        do throws(SystemCallError) {
            fd = FileDescriptor(try systemCall("timerfd_create") { timerfd_create(CLOCK_MONOTONIC, Int32(TFD_NONBLOCK | TFD_CLOEXEC)) })
        } catch {
            throw .system(error)
        }
    }

    /// Fires at absolute monotonic `deadlineNs`, then every `intervalNs` (0: once) with no
    /// further syscall. A deadline already past fires at once.
    func arm(atNs deadlineNs: UInt64, everyNs intervalNs: UInt64 = 0) {
        var spec = itimerspec()
        // 0 would disarm: a deadline of 0 means "now".
        spec.it_value = Self.timespec(ns: max(deadlineNs, 1))
        spec.it_interval = Self.timespec(ns: intervalNs)
        _ = timerfd_settime(fd.raw, Int32(TFD_TIMER_ABSTIME), &spec, nil)
    }

    /// Fires every `intervalNs`, first after one interval.
    func arm(everyNs intervalNs: UInt64) {
        var spec = itimerspec()
        spec.it_value = Self.timespec(ns: intervalNs)
        spec.it_interval = spec.it_value
        _ = timerfd_settime(fd.raw, 0, &spec, nil)
    }

    func disarm() {
        var spec = itimerspec()
        _ = timerfd_settime(fd.raw, 0, &spec, nil)
    }

    /// Reads the expiration count (0 if none: a spurious wake-up).
    @discardableResult
    func drain() -> UInt64 {
        var count: UInt64 = 0
        let n = try? nonBlocking("read") { read(fd.raw, &count, 8) }
        return n == 8 ? count : 0
    }

    private static func timespec(ns: UInt64) -> Glibc.timespec {
        Glibc.timespec(tv_sec: Int(ns / 1_000_000_000), tv_nsec: Int(ns % 1_000_000_000))
    }
}
