import Glibc

/// epoll, timerfd and signalfd, which Swift's Glibc module does not import.
///
/// Why dlsym: the package has no C shim target for the daemon, and these are stable glibc
/// symbols. Calling them through `@convention(c)` pointers keeps the C ABI exact (unlike
/// `@_silgen_name`). Structures are handled as raw bytes with their documented Linux layouts.
enum LinuxCalls {
    typealias IntFlagsFn = @convention(c) (Int32) -> Int32
    typealias EpollCtlFn = @convention(c) (Int32, Int32, Int32, UnsafeMutableRawPointer?) -> Int32
    typealias EpollWaitFn = @convention(c) (Int32, UnsafeMutableRawPointer?, Int32, Int32) -> Int32
    typealias TimerfdCreateFn = @convention(c) (Int32, Int32) -> Int32
    typealias TimerfdSettimeFn = @convention(c) (Int32, Int32, UnsafePointer<itimerspec>?, UnsafeMutablePointer<itimerspec>?) -> Int32
    typealias SignalfdFn = @convention(c) (Int32, UnsafePointer<sigset_t>?, Int32) -> Int32

    static let epollCreate1: IntFlagsFn = symbol("epoll_create1")
    static let epollCtl: EpollCtlFn = symbol("epoll_ctl")
    static let epollWait: EpollWaitFn = symbol("epoll_wait")
    static let timerfdCreate: TimerfdCreateFn = symbol("timerfd_create")
    static let timerfdSettime: TimerfdSettimeFn = symbol("timerfd_settime")
    static let signalfd: SignalfdFn = symbol("signalfd")

    private static func symbol<F>(_ name: String) -> F {
        guard let handle = dlopen(nil, RTLD_NOW), let p = dlsym(handle, name) else {
            fatalError("vsyncd: glibc has no \(name): this daemon needs Linux with glibc")
        }
        return unsafeBitCast(p, to: F.self)
    }

    static let EPOLLIN: UInt32 = 0x001
    static let EPOLLOUT: UInt32 = 0x004
    static let EPOLLERR: UInt32 = 0x008
    static let EPOLLHUP: UInt32 = 0x010
    static let EPOLL_CTL_ADD: Int32 = 1
    static let EPOLL_CTL_DEL: Int32 = 2
    static let EPOLL_CTL_MOD: Int32 = 3
    static let TFD_TIMER_ABSTIME: Int32 = 1

    /// `struct epoll_event` is packed on x86_64 (12 bytes), naturally aligned elsewhere (16).
    #if arch(x86_64)
    static let epollEventSize = 12
    static let epollDataOffset = 4
    #else
    static let epollEventSize = 16
    static let epollDataOffset = 8
    #endif
}

/// CLOCK_MONOTONIC now, ns: the clock of every vblank timestamp.
func monotonicNow() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

func errnoText(_ code: Int32 = errno) -> String { String(cString: strerror(code)) }

/// One epoll instance; the fd is the key of every registration.
final class Epoll {
    let fd: Int32
    private var buffer: UnsafeMutableRawPointer
    private let capacity = 64

    init() throws(DaemonError) {
        fd = LinuxCalls.epollCreate1(O_CLOEXEC)
        guard fd >= 0 else { throw DaemonError("epoll_create1 failed: \(errnoText())") }
        buffer = UnsafeMutableRawPointer.allocate(byteCount: LinuxCalls.epollEventSize * capacity, alignment: 8)
    }

    deinit {
        buffer.deallocate()
        close(fd)
    }

    private func control(_ op: Int32, _ target: Int32, _ events: UInt32) -> Int32 {
        var raw = [UInt8](repeating: 0, count: LinuxCalls.epollEventSize)
        raw.withUnsafeMutableBytes { b in
            b.storeBytes(of: events, toByteOffset: 0, as: UInt32.self)
            b.storeBytes(of: UInt64(UInt32(bitPattern: target)), toByteOffset: LinuxCalls.epollDataOffset, as: UInt64.self)
        }
        return raw.withUnsafeMutableBytes { LinuxCalls.epollCtl(fd, op, target, $0.baseAddress) }
    }

    func add(_ target: Int32, events: UInt32) throws(DaemonError) {
        guard control(LinuxCalls.EPOLL_CTL_ADD, target, events) == 0 else {
            throw DaemonError("epoll_ctl(ADD, fd \(target)) failed: \(errnoText())")
        }
    }

    func modify(_ target: Int32, events: UInt32) {
        _ = control(LinuxCalls.EPOLL_CTL_MOD, target, events)
    }

    func remove(_ target: Int32) {
        _ = control(LinuxCalls.EPOLL_CTL_DEL, target, 0)
    }

    /// Waits up to `timeoutMs` (-1: forever) and returns (fd, events) pairs.
    func wait(timeoutMs: Int32) -> [(fd: Int32, events: UInt32)] {
        let n = LinuxCalls.epollWait(fd, buffer, Int32(capacity), timeoutMs)
        guard n > 0 else { return [] }
        var out: [(fd: Int32, events: UInt32)] = []
        out.reserveCapacity(Int(n))
        for i in 0..<Int(n) {
            let base = buffer + i * LinuxCalls.epollEventSize
            let events = base.loadUnaligned(as: UInt32.self)
            let data = (base + LinuxCalls.epollDataOffset).loadUnaligned(as: UInt64.self)
            out.append((Int32(bitPattern: UInt32(truncatingIfNeeded: data)), events))
        }
        return out
    }
}

/// A CLOCK_MONOTONIC timerfd.
final class TimerFD {
    let fd: Int32

    init() throws(DaemonError) {
        fd = LinuxCalls.timerfdCreate(CLOCK_MONOTONIC, O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { throw DaemonError("timerfd_create failed: \(errnoText())") }
    }

    deinit { close(fd) }

    /// Fires once at absolute monotonic `deadlineNs`.
    func arm(atNs deadlineNs: UInt64) {
        var spec = itimerspec()
        spec.it_value = timespec(tv_sec: Int(deadlineNs / 1_000_000_000), tv_nsec: Int(deadlineNs % 1_000_000_000))
        _ = LinuxCalls.timerfdSettime(fd, LinuxCalls.TFD_TIMER_ABSTIME, &spec, nil)
    }

    /// Fires every `intervalNs`, first after one interval.
    func arm(everyNs intervalNs: UInt64) {
        var spec = itimerspec()
        let ts = timespec(tv_sec: Int(intervalNs / 1_000_000_000), tv_nsec: Int(intervalNs % 1_000_000_000))
        spec.it_value = ts
        spec.it_interval = ts
        _ = LinuxCalls.timerfdSettime(fd, 0, &spec, nil)
    }

    func disarm() {
        var spec = itimerspec()
        _ = LinuxCalls.timerfdSettime(fd, 0, &spec, nil)
    }

    /// Reads the expiration count (0 if none: spurious wake-up).
    @discardableResult
    func drain() -> UInt64 {
        var count: UInt64 = 0
        let n = read(fd, &count, 8)
        return n == 8 ? count : 0
    }
}

/// A failure that stops vsyncd, as the one line it prints.
public struct DaemonError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}
