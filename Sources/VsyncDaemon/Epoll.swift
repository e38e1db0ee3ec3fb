import CLinux
import Glibc

/// One epoll instance, the daemon's only wait. Owns its fd; the registered fd is the key of
/// every registration, so a ready event names its fd directly.
final class Epoll {
    let fd: FileDescriptor
    /// Reused by every wait: the loop allocates nothing per wake-up.
    private let events: UnsafeMutableBufferPointer<epoll_event>

    init(capacity: Int = 64) throws(DaemonError) {
        do throws(SystemCallError) {
            fd = FileDescriptor(try systemCall("epoll_create1") { epoll_create1(Int32(EPOLL_CLOEXEC)) })
        } catch {
            throw .system(error)
        }
        events = .allocate(capacity: capacity)
    }

    deinit { events.deallocate() }

    static let readable = EPOLLIN.rawValue
    static let writable = EPOLLOUT.rawValue
    static let error = EPOLLERR.rawValue
    static let hangUp = EPOLLHUP.rawValue

    private func control(_ op: Int32, _ target: Int32, _ mask: UInt32) throws(SystemCallError) {
        var event = epoll_event()
        event.events = mask
        event.data.fd = target
        _ = try systemCall("epoll_ctl(\(op == EPOLL_CTL_ADD ? "ADD" : op == EPOLL_CTL_MOD ? "MOD" : "DEL"), fd \(target))") {
            epoll_ctl(fd.raw, op, target, &event)
        }
    }

    func add(_ target: Int32, events mask: UInt32) throws(DaemonError) {
        do throws(SystemCallError) { try control(EPOLL_CTL_ADD, target, mask) } catch { throw .system(error) }
    }

    func modify(_ target: Int32, events mask: UInt32) {
        try? control(EPOLL_CTL_MOD, target, mask)
    }

    func remove(_ target: Int32) {
        try? control(EPOLL_CTL_DEL, target, 0)
    }

    /// Waits up to `timeoutMs` (-1: forever) and calls `body` with each ready fd and its events.
    func wait(timeoutMs: Int32, _ body: (_ fd: Int32, _ events: UInt32) -> Void) {
        guard let n = try? systemCall("epoll_wait", { epoll_wait(fd.raw, events.baseAddress, Int32(events.count), timeoutMs) }),
            n > 0
        else { return }
        for i in 0..<Int(n) {
            body(events[i].data.fd, events[i].events)
        }
    }
}
