import Foundation
import Glibc
import VsyncCore

/// A FAKE vsyncd for DisplayLink's library tests: a software clock at `hz` on a temp socket,
/// speaking the real wire protocol through VsyncCore's codec. It picks divisors with the real
/// `RateMapping`, but nothing else of the daemon: the real one is tested in DisplayLinkDaemonTests.
///
/// `@unchecked Sendable`: every mutable field is guarded by `lock`.
final class FakeVsyncd: @unchecked Sendable {
    let path: String
    let hz: Double
    var periodNs: UInt64 { UInt64(1e9 / hz) }

    private struct Subscription {
        var divisor: UInt32
        var paused: Bool
        var skipped: UInt32 = 0
    }

    private let lock = NSLock()
    private var listenFD: Int32 = -1
    private var clients: [Int32: [UInt32: Subscription]] = [:]
    private var running = false
    private var stopped = DispatchSemaphore(value: 0)
    private var _subscribes = 0
    private var _connections = 0
    /// The next subscription answered with ERROR unknownDisplay instead (for "display gone" tests).
    var refuseDisplays = false

    /// SUBSCRIBE requests received so far (every connection).
    var subscribes: Int { lock.withLock { _subscribes } }
    /// Handshakes completed so far.
    var connections: Int { lock.withLock { _connections } }

    init(hz: Double = 60, path: String? = nil) throws {
        self.hz = hz
        self.path = path ?? FakeVsyncd.temporarySocketPath()
        try start()
    }

    static func temporarySocketPath() -> String {
        NSTemporaryDirectory() + "/dl-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).sock"
    }

    struct SetupError: Error, CustomStringConvertible { let description: String }

    func start() throws {
        unlink(path)
        let fd = socket(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        withUnsafeMutableBytes(of: &addr.sun_path) { $0.copyBytes(from: bytes); $0[bytes.count] = 0 }
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard rc == 0, listen(fd, 16) == 0 else {
            close(fd)
            throw SetupError(description: "fake vsyncd cannot listen on \(path): errno \(errno)")
        }
        lock.withLock {
            listenFD = fd
            running = true
            stopped = DispatchSemaphore(value: 0)
        }
        let thread = Thread { [self] in self.run() }
        thread.start()
    }

    /// Closes every client and the socket, as a daemon that exits.
    func stop() {
        let wasRunning = lock.withLock { () -> Bool in
            let was = running
            running = false
            return was
        }
        if wasRunning { stopped.wait() }
        unlink(path)
    }

    /// Sends DISPLAY_EVENT removed for the fake display to every client.
    func removeDisplay() {
        let message = ServerMessage.displayEvent(DisplayEvent(kind: .removed, display: display)).encoded()
        lock.withLock { for fd in clients.keys { _ = message.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } } }
    }

    /// Sends DISPLAY_EVENT `kind` for the fake display, reporting `hz` as its refresh.
    func sendEvent(_ kind: DisplayEventKind, hz: Double) {
        var info = display
        info.refreshMillihertz = UInt64(hz * 1000)
        info.periodNs = UInt64(1e9 / hz)
        let message = ServerMessage.displayEvent(DisplayEvent(kind: kind, display: info)).encoded()
        lock.withLock { for fd in clients.keys { _ = message.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } } }
    }

    var display: DisplayInfo {
        DisplayInfo(displayID: 1, crtcID: 0, connectorID: 0, state: .on, flags: [.synthetic, .primary],
                    refreshMillihertz: UInt64(hz * 1000), periodNs: periodNs, width: 0, height: 0,
                    connectorName: "timer", deviceName: "")
    }

    deinit { stop() }

    private func now() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    private func run() {
        let period = periodNs
        var next = now() + period
        var sequence: UInt64 = 0
        var buffer = [UInt8](repeating: 0, count: WireProtocol.maxMessageSize)
        while lock.withLock({ running }) {
            var fds = lock.withLock { [pollfd(fd: listenFD, events: Int16(POLLIN), revents: 0)] + clients.keys.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) } }
            let t = now()
            let timeout = t >= next ? 0 : Int32((next - t) / 1_000_000)
            _ = poll(&fds, nfds_t(fds.count), timeout)
            if fds[0].revents != 0 {
                let client = accept(fds[0].fd, nil, nil)
                if client >= 0 {
                    _ = fcntl(client, F_SETFL, fcntl(client, F_GETFL) | O_NONBLOCK)
                    lock.withLock { clients[client] = [:] }
                }
            }
            for pfd in fds.dropFirst() where pfd.revents != 0 {
                while true {
                    let n = buffer.withUnsafeMutableBytes { recv(pfd.fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
                    if n == 0 || (n < 0 && errno != EAGAIN) { drop(pfd.fd); break }
                    if n < 0 { break }
                    let message = try? buffer.withUnsafeBytes { raw throws(WireError) in
                        try ClientMessage.decode(UnsafeRawBufferPointer(rebasing: raw[0..<n]))
                    }
                    guard let message else { drop(pfd.fd); break }
                    handle(message, from: pfd.fd)
                }
            }
            while now() >= next {
                sequence += 1
                tick(sequence: sequence, timestamp: next, period: period)
                next += period
            }
        }
        lock.withLock {
            for fd in clients.keys { close(fd) }
            clients = [:]
            close(listenFD)
            listenFD = -1
        }
        stopped.signal()
    }

    private func drop(_ fd: Int32) {
        lock.withLock { _ = clients.removeValue(forKey: fd) }
        close(fd)
    }

    private func reply(_ fd: Int32, _ message: ServerMessage) {
        let bytes = message.encoded()
        _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    private func handle(_ message: ClientMessage, from fd: Int32) {
        switch message {
        case .hello:
            lock.withLock { _connections += 1 }
            reply(fd, .welcome(Welcome(version: 1, serverFlags: [.syntheticSource], serverPID: UInt32(getpid()))))
        case .subscribe(let s):
            let refuse = lock.withLock { () -> Bool in
                _subscribes += 1
                if refuseDisplays { return true }
                let divisor = RateMapping.divisor(for: s.range, refreshHz: hz)
                clients[fd]?[s.subscriptionID] = Subscription(divisor: divisor, paused: s.flags.contains(.startPaused))
                return false
            }
            if refuse {
                reply(fd, .error(ErrorMessage(code: .unknownDisplay, subscriptionID: s.subscriptionID, message: "no display matches")))
                return
            }
            let divisor = lock.withLock { clients[fd]?[s.subscriptionID]?.divisor ?? 1 }
            reply(fd, .subscribed(Subscribed(subscriptionID: s.subscriptionID, displayID: 1, divisor: divisor,
                                             displayIntervalNs: periodNs, clientIntervalNs: periodNs * UInt64(divisor), display: display)))
        case .setRate(let r):
            lock.withLock { clients[fd]?[r.subscriptionID]?.divisor = RateMapping.divisor(for: r.range, refreshHz: hz) }
        case .pause(let id):
            lock.withLock { clients[fd]?[id]?.paused = true }
        case .resume(let id):
            lock.withLock { clients[fd]?[id]?.paused = false }
        case .unsubscribe(let id):
            lock.withLock { _ = clients[fd]?.removeValue(forKey: id) }
        case .listDisplays:
            reply(fd, .displayList([display]))
        case .setWorkDuration:
            break  // this fake speaks protocol 1
        }
    }

    private func tick(sequence: UInt64, timestamp: UInt64, period: UInt64) {
        lock.withLock {
            for (fd, subs) in clients {
                for (id, sub) in subs where !sub.paused && sequence % UInt64(sub.divisor) == 0 {
                    let interval = period * UInt64(sub.divisor)
                    let tick = Tick(subscriptionID: id, displayID: 1, sequence: sequence, timestampNs: timestamp,
                                    targetTimestampNs: timestamp + interval, displayIntervalNs: period,
                                    clientIntervalNs: interval, skipped: sub.skipped, divisor: sub.divisor, flags: [.synthetic])
                    let bytes = ServerMessage.tick(tick).encoded()
                    let n = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                    clients[fd]?[id]?.skipped = n < 0 ? sub.skipped + 1 : 0
                }
            }
        }
    }
}
