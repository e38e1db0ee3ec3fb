import Foundation
import Glibc
import Testing
import VsyncCore

/// Starts the real `vsyncd` binary (built next to the test bundle) on a socket in a temp dir.
///
/// `@unchecked Sendable`: `process` is replaced only by `start()`, which a test calls from the
/// one task that owns the daemon; everything else is immutable.
final class DaemonProcess: @unchecked Sendable {
    private(set) var process = Process()
    let directory: URL
    let socketPath: String
    let logURL: URL
    private let executable: String
    private let launchArguments: [String]
    private let environment: [String: String]

    /// `name` in `$VSYNCD_BIN_DIR`, or next to this test binary (`swift build --build-tests`
    /// builds every product there; the test binary may sit inside an .xctest bundle), or in the
    /// Benchmarks package's build of the same configuration (vsync-soak:
    /// `swift build --package-path Benchmarks`).
    static func binary(_ name: String) throws -> String {
        var directories: [String] = []
        if let dir = ProcessInfo.processInfo.environment["VSYNCD_BIN_DIR"] { directories.append(dir) }
        var dir = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
        while dir.pathComponents.contains(where: { $0.hasSuffix(".xctest") }) { dir.deleteLastPathComponent() }
        directories.append(dir.path)
        // Tests/DaemonTests/this file → the package root; `dir` ends in the configuration (debug).
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        directories.append(root.appendingPathComponent("Benchmarks/.build").appendingPathComponent(dir.lastPathComponent).path)
        for directory in directories {
            let path = directory + "/" + name
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        throw HarnessError("no \(name) binary in \(directories): build it with 'swift build' first")
    }

    /// The built `vsyncd`.
    static var binaryPath: String {
        (try? binary("vsyncd")) ?? "vsyncd"
    }

    init(hertz: Double = 60, extra: [String] = [], environment: [String: String] = [:],
         launcher: [String] = [], socketPath: String? = nil, waitForSocket: Bool = true,
         logLevel: String = "debug") throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("vsyncd-test-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        self.socketPath = socketPath ?? directory.appendingPathComponent("s.sock").path
        logURL = directory.appendingPathComponent("vsyncd.log")
        _ = FileManager.default.createFile(atPath: logURL.path, contents: nil)
        let daemonArguments = ["--source", "timer:\(hertz)", "--socket", self.socketPath, "--log-level", logLevel] + extra
        let vsyncd = try Self.binary("vsyncd")
        if launcher.isEmpty {
            executable = vsyncd
            launchArguments = daemonArguments
        } else {
            // e.g. systemd-socket-activate, which then runs vsyncd in the same process.
            executable = launcher[0]
            launchArguments = Array(launcher.dropFirst()) + [vsyncd] + daemonArguments
        }
        self.environment = environment
        try launch()
        if waitForSocket { try waitUntilListening() }
    }

    private func launch() throws {
        process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = launchArguments
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        }
        let log = try FileHandle(forWritingTo: logURL)
        log.seekToEndOfFile()
        process.standardError = log
        process.standardOutput = log
        try process.run()
    }

    /// Starts vsyncd again, with the same arguments on the same socket (after `kill()`).
    func start() throws {
        guard !process.isRunning else { return }
        try launch()
        try waitUntilListening()
    }

    var isRunning: Bool { process.isRunning }

    /// SIGKILL: the daemon dies without closing anything, as in a crash. The socket file stays
    /// behind; the next vsyncd replaces it.
    func kill() {
        guard process.isRunning else { return }
        Glibc.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    func waitUntilListening(timeout: Double = 10) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let c = try? RawClient(path: socketPath) { _ = c; return }
            guard process.isRunning else { break }
            usleep(20_000)
        }
        throw HarnessError("vsyncd did not start listening on \(socketPath); log:\n\(log)")
    }

    var pid: Int32 { process.processIdentifier }
    var log: String { (try? String(contentsOf: logURL, encoding: .utf8)) ?? "" }

    /// SIGTERM and wait; returns the exit status.
    @discardableResult
    func stop() -> Int32 {
        if process.isRunning { Glibc.kill(process.processIdentifier, SIGTERM) }
        process.waitUntilExit()
        return process.terminationStatus
    }

    deinit {
        if process.isRunning { Glibc.kill(process.processIdentifier, SIGKILL); process.waitUntilExit() }
        try? FileManager.default.removeItem(at: directory)
    }
}

struct HarnessError: Error, CustomStringConvertible {
    let description: String
    init(_ d: String) { description = d }
}

enum Received: Equatable {
    case message(ServerMessage)
    case closed
    case timeout
    /// A datagram the codec could not read (already recorded as a test issue): never taken for
    /// silence, so "no tick came" cannot pass when the daemon sent garbage.
    case undecodable(String)
}

/// A raw SOCK_SEQPACKET client speaking the wire protocol through VsyncCore's codec.
final class RawClient {
    private(set) var fd: Int32
    /// The size of the last datagram received.
    private(set) var lastSize = 0
    /// When vsyncd sent the last datagram received, on CLOCK_MONOTONIC (nil if the kernel gave
    /// no stamp). The kernel stamps a Unix datagram as the sender queues it (SO_TIMESTAMPNS),
    /// so a test can time what vsyncd did, not when this client got to read it on a busy machine.
    private(set) var lastSentNs: UInt64?
    /// CLOCK_REALTIME − CLOCK_MONOTONIC, to put the kernel's stamps on the daemon's clock.
    private let realtimeOffsetNs: Int64

    init(path: String) throws {
        fd = socket(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue), 0)
        guard fd >= 0 else { throw HarnessError("socket: \(errno)") }
        var on: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &on, socklen_t(MemoryLayout<Int32>.size))
        realtimeOffsetNs = ClockPair.tightest(monotonic: monotonicNowNs, realtime: realtimeNowNs).offsetNs
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, b) in path.utf8.enumerated() { raw[i] = b }
        }
        let rc = withUnsafePointer(to: &address) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard rc == 0 else {
            let e = errno
            Glibc.close(fd)
            throw HarnessError("connect \(path): \(String(cString: strerror(e)))")
        }
    }

    deinit { close() }

    /// Closes the socket now, as a process does when it exits (idempotent).
    func close() {
        if fd >= 0 { Glibc.close(fd); fd = -1 }
    }

    func send(_ bytes: [UInt8]) {
        _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    func send(_ message: ClientMessage) { send(message.encoded()) }

    /// The next message within `timeout` seconds.
    func receive(timeout: Double = 2) -> Received {
        var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&pfd, 1, Int32(timeout * 1000)) > 0 else { return .timeout }
        var buffer = [UInt8](repeating: 0, count: 8192)
        var sent: timespec?
        let n = buffer.withUnsafeMutableBytes { receiveStamped(into: $0, sent: &sent) }
        guard n > 0 else { return .closed }
        lastSize = n
        lastSentNs = sent.map { UInt64(Int64($0.tv_sec) * 1_000_000_000 + Int64($0.tv_nsec) - realtimeOffsetNs) }
        let problem: String
        do {
            if let message = try ServerMessage.decode(Array(buffer[0..<n])) { return .message(message) }
            problem = "a message type this codec does not know"
        } catch {
            problem = "\(error)"
        }
        Issue.record("vsyncd sent an undecodable datagram of \(n) bytes: \(problem)")
        return .undecodable(problem)
    }

    /// One datagram into `buffer` with the kernel's send stamp (SCM_TIMESTAMPNS) in `sent`.
    private func receiveStamped(into buffer: UnsafeMutableRawBufferPointer, sent: inout timespec?) -> Int {
        var iov = iovec(iov_base: buffer.baseAddress, iov_len: buffer.count)
        var control = [UInt8](repeating: 0, count: 64)
        return control.withUnsafeMutableBytes { c in
            var message = msghdr()
            message.msg_control = c.baseAddress
            message.msg_controllen = c.count
            let n = withUnsafeMutablePointer(to: &iov) { iov in
                message.msg_iov = iov
                message.msg_iovlen = 1
                return recvmsg(fd, &message, 0)
            }
            guard n > 0, message.msg_controllen >= MemoryLayout<cmsghdr>.size else { return n }
            let header = c.load(as: cmsghdr.self)
            if header.cmsg_level == SOL_SOCKET, header.cmsg_type == SO_TIMESTAMPNS,
               Int(header.cmsg_len) >= MemoryLayout<cmsghdr>.size + MemoryLayout<timespec>.size {
                sent = c.loadUnaligned(fromByteOffset: MemoryLayout<cmsghdr>.size, as: timespec.self)
            }
            return n
        }
    }

    /// Skips non-tick messages; nil on timeout or close.
    func nextTick(timeout: Double = 2) -> Tick? {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            switch receive(timeout: deadline.timeIntervalSinceNow) {
            case .message(.tick(let t)): return t
            case .message: continue
            case .closed, .timeout, .undecodable: return nil
            }
        }
        return nil
    }

    /// Messages until `done` returns true for one (included) or `timeout` seconds pass.
    func messages(timeout: Double = 3, until done: (ServerMessage) -> Bool) -> [ServerMessage] {
        var out: [ServerMessage] = []
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline, case .message(let m) = receive(timeout: max(0, deadline.timeIntervalSinceNow)) {
            out.append(m)
            if done(m) { break }
        }
        return out
    }

    /// Everything already in the socket, without waiting.
    func drain() -> [ServerMessage] {
        var out: [ServerMessage] = []
        while case .message(let m) = receive(timeout: 0) { out.append(m) }
        return out
    }

    /// Reads until the server closes the connection (skipping what comes first).
    func waitForClose(timeout: Double = 3) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            switch receive(timeout: max(0, deadline.timeIntervalSinceNow)) {
            case .closed: return true
            case .timeout, .undecodable: return false
            case .message: continue
            }
        }
        return false
    }

    @discardableResult
    func handshake(name: String = "test", version: UInt16 = 1) throws -> Welcome {
        send(.hello(Hello(minVersion: 1, maxVersion: version, clientName: name)))
        guard case .message(.welcome(let w)) = receive() else { throw HarnessError("no WELCOME") }
        return w
    }

    func subscribe(_ id: UInt32, fps: Int, flags: SubscribeFlags = [], selector: DisplaySelector = .primary) throws -> Subscribed {
        send(.subscribe(Subscribe(subscriptionID: id, selector: selector, range: FrameRateRange(preferredFramesPerSecond: fps), flags: flags)))
        while true {
            switch receive() {
            case .message(.subscribed(let s)): return s
            case .message(.tick): continue
            case let other: throw HarnessError("expected SUBSCRIBED, got \(other)")
            }
        }
    }
}

func monotonicNowNs() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

func realtimeNowNs() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_REALTIME, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}
