import DisplayLink
import Foundation
import Glibc
import VsyncCore

/// The real `vsyncd` binary on a temp socket with the timer source, for DisplayLink tests.
final class DisplayLinkDaemonProcess: @unchecked Sendable {
    // `@unchecked Sendable`: `process` is only replaced by start(), which tests call from one task.
    let socketPath: String
    let hz: Double
    private var process: Process?

    struct Missing: Error, CustomStringConvertible { let description: String }

    /// `name` next to this test binary (swift test builds every product there), or in `$VSYNCD_BIN_DIR`.
    static func binary(_ name: String) throws -> String {
        var directories: [String] = []
        if let dir = ProcessInfo.processInfo.environment["VSYNCD_BIN_DIR"] { directories.append(dir) }
        var dir = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
        while dir.pathComponents.contains(where: { $0.hasSuffix(".xctest") }) { dir.deleteLastPathComponent() }
        directories.append(dir.path)
        for directory in directories {
            let path = directory + "/" + name
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        throw Missing(description: "no \(name) binary in \(directories): build it with 'swift build' first")
    }

    init(hz: Double = 60) throws {
        self.hz = hz
        socketPath = NSTemporaryDirectory() + "/vsyncd-dl-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).sock"
        try start()
    }

    /// Starts vsyncd and returns once its socket accepts connections.
    func start() throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try Self.binary("vsyncd"))
        let group = getgrgid(getgid()).map { String(cString: $0.pointee.gr_name) } ?? "root"
        process.arguments = ["--source", "timer:\(hz)", "--socket", socketPath, "--group", group, "--log-level", "warning"]
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        self.process = process
        let deadline = DisplayLink.currentTime() + 5
        while DisplayLink.currentTime() < deadline {
            if Self.accepts(socketPath) { return }
            usleep(10_000)
        }
        throw Missing(description: "vsyncd did not listen on \(socketPath) within 5 s")
    }

    private static func accepts(_ path: String) -> Bool {
        let fd = socket(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        defer { close(fd) }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        withUnsafeMutableBytes(of: &addr.sun_path) { $0.copyBytes(from: bytes); $0[bytes.count] = 0 }
        return withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        } == 0
    }

    var isRunning: Bool { process?.isRunning ?? false }

    /// SIGKILL: the daemon dies without closing anything (a crash).
    func kill() {
        guard let process, process.isRunning else { return }
        Glibc.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        // The socket file stays behind, as after a crash; the next vsyncd replaces it.
    }

    /// SIGTERM: a clean stop.
    func stop() {
        guard let process, process.isRunning else { return }
        process.terminate()
        process.waitUntilExit()
    }

    deinit { stop() }
}

/// A bare protocol client (no DisplayLink), for doing what a process does when it exits:
/// closing its socket with subscriptions still live.
struct RawVsyncClient {
    let fd: Int32

    init?(path: String) {
        fd = socket(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        withUnsafeMutableBytes(of: &addr.sun_path) { $0.copyBytes(from: bytes); $0[bytes.count] = 0 }
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard rc == 0 else { Glibc.close(fd); return nil }
    }

    func send(_ message: ClientMessage) {
        let bytes = message.encoded()
        _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    /// The next message, or nil after `timeout` seconds or on EOF.
    func receive(timeout: Double) -> ServerMessage? {
        var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&pfd, 1, Int32(timeout * 1000)) == 1 else { return nil }
        var buffer = [UInt8](repeating: 0, count: WireProtocol.maxMessageSize)
        let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        guard n > 0 else { return nil }
        return try? ServerMessage.decode(Array(buffer[0..<n]))
    }

    func close() { Glibc.close(fd) }
}
