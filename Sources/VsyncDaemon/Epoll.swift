import CLinux
import Glibc

/// One epoll instance, the daemon's only wait. Owns its fd (closed in deinit); the registered fd
/// is the key of every registration, so a ready event names its fd directly.
final class Epoll {
    let fd: Int32
    /// Reused by every wait: the loop allocates nothing per wake-up.
    private let events: UnsafeMutableBufferPointer<epoll_event>

    init(capacity: Int = 64) throws(DaemonError) {
        fd = epoll_create1(Int32(EPOLL_CLOEXEC))
        guard fd >= 0 else { throw DaemonError("epoll_create1 failed: \(errnoText())") }
        events = .allocate(capacity: capacity)
    }

    deinit {
        events.deallocate()
        close(fd)
    }

    static let readable = EPOLLIN.rawValue
    static let writable = EPOLLOUT.rawValue
    static let error = EPOLLERR.rawValue
    static let hangUp = EPOLLHUP.rawValue

    private func control(_ op: Int32, _ target: Int32, _ mask: UInt32) -> Int32 {
        var event = epoll_event()
        event.events = mask
        event.data.fd = target
        return epoll_ctl(fd, op, target, &event)
    }

    func add(_ target: Int32, events mask: UInt32) throws(DaemonError) {
        guard control(EPOLL_CTL_ADD, target, mask) == 0 else {
            throw DaemonError("epoll_ctl(ADD, fd \(target)) failed: \(errnoText())")
        }
    }

    func modify(_ target: Int32, events mask: UInt32) {
        _ = control(EPOLL_CTL_MOD, target, mask)
    }

    func remove(_ target: Int32) {
        _ = control(EPOLL_CTL_DEL, target, 0)
    }

    /// Waits up to `timeoutMs` (-1: forever) and calls `body` with each ready fd and its events.
    func wait(timeoutMs: Int32, _ body: (_ fd: Int32, _ events: UInt32) -> Void) {
        let n = epoll_wait(fd, events.baseAddress, Int32(events.count), timeoutMs)
        guard n > 0 else { return }
        for i in 0..<Int(n) {
            body(events[i].data.fd, events[i].events)
        }
    }
}
