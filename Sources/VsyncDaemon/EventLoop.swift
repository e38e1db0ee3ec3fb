import Glibc
import Logging

/// The one epoll loop's own state: the epoll set, what each descriptor in it is for (one
/// indexed load per wake-up, `DescriptorTable`), the source's descriptors as last registered,
/// and the signalfd whose SIGTERM or SIGINT ends the loop.
final class EventLoop {
    /// What a descriptor is for. A client's carries the client, so a wake-up finds it with the
    /// role's one load and no second table.
    enum Role {
        case listener, signal, housekeeping, pacing, source
        case client(Client)
    }

    let epoll: Epoll
    /// The signalfd (SIGTERM, SIGINT).
    let signals: FileDescriptor
    private(set) var roles = DescriptorTable<Role>()
    /// The source's descriptors registered now (`syncSource`).
    private var sourceFDs: Set<Int32> = []
    /// Cleared by a stop signal: the loop ends after the batch it came in.
    private(set) var running = true

    init(signals: consuming FileDescriptor) throws(DaemonError) {
        epoll = try Epoll()
        self.signals = signals
        try register(self.signals.raw, .signal)
    }

    func register(_ fd: Int32, _ role: Role, events: UInt32 = Epoll.readable) throws(DaemonError) {
        try epoll.add(fd, events: events)
        roles[fd] = role
    }

    func unregister(_ fd: Int32) {
        epoll.remove(fd)
        roles[fd] = nil
    }

    /// EPOLLOUT on or off for a client socket: on only while something waits to be sent.
    func watchOutput(_ fd: Int32, _ on: Bool) {
        epoll.modify(fd, events: on ? Epoll.readable | Epoll.writable : Epoll.readable)
    }

    /// Registers the source's descriptors as they are now (cards open and close on a rescan).
    func syncSource(_ wanted: Set<Int32>, logger: Logger) {
        for fd in sourceFDs.subtracting(wanted) { unregister(fd) }
        for fd in wanted.subtracting(sourceFDs) {
            do { try register(fd, .source) } catch { logger.error("\(error)") }
        }
        // A card closed and another opened in one rescan can get the same fd number: the kernel
        // dropped the closed file from the epoll set, so the new one is added (EEXIST, ignored,
        // when it is the same file).
        for fd in wanted.intersection(sourceFDs) where isSource(fd) { try? epoll.add(fd, events: Epoll.readable) }
        sourceFDs = wanted
    }

    private func isSource(_ fd: Int32) -> Bool {
        if case .source? = roles[fd] { return true }
        return false
    }

    /// The signalfd is readable: a stop signal came.
    func readSignal(logger: Logger) {
        var info = [UInt8](repeating: 0, count: 128)  // struct signalfd_siginfo
        guard let n = try? nonBlocking("read", { info.withUnsafeMutableBytes { read(signals.raw, $0.baseAddress, 128) } }),
            n >= 4
        else { return }
        let signo = info.withUnsafeBytes { $0.load(as: UInt32.self) }
        logger.info("stopping on \(signo == UInt32(SIGTERM) ? "SIGTERM" : signo == UInt32(SIGINT) ? "SIGINT" : "signal \(signo)")")
        running = false
    }
}
