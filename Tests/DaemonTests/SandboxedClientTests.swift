import Foundation
import Glibc
import Testing

/// A client sandboxed as Flatpak sandboxes apps (bubblewrap: its own user, pid, ipc, net and uts
/// namespaces, no /dev/dri, only the socket's directory from the host), run as a plain user:
/// it gets ticks, paced frames and the timing page, vsyncd names it by its app id, and one app
/// holds at most half of its user's connections.
@Suite("vsyncd sandboxed clients", .serialized)
struct SandboxedClientTests {
    static let appUser: UInt32 = 61002
    static let appID = "org.vsyncd.SandboxTest"
    static let canRun = SeatClient.canSwitchUsers && SeatClient.hasBubblewrap
    static let inCI = ProcessInfo.processInfo.environment["CI"] == "true"

    /// How many of the app's connections the daemon has seen close.
    static func disconnects(of app: String, in log: String) -> Int {
        log.split(separator: "\n").filter { $0.contains("client disconnected: ") && $0.contains(" app \(app)") }.count
    }

    /// A directory the app's user can read, with the app's /.flatpak-info in it.
    static func appDirectory() throws -> (dir: URL, info: String) {
        let dir = try LibvsyncTests.temporaryDirectory()
        chmod(dir.path, 0o755)
        let info = dir.appendingPathComponent("flatpak-info").path
        try "[Application]\nname=\(appID)\nruntime=runtime/org.freedesktop.Platform/x86_64/23.08\n"
            .write(toFile: info, atomically: true, encoding: .utf8)
        chmod(info, 0o644)
        return (dir, info)
    }

    @Test(.enabled(if: canRun || inCI, "needs root, setpriv and bubblewrap (Debian bubblewrap)"), .timeLimit(.minutes(2)))
    func aSandboxedAppGetsTicksPacedFramesAndTheTimingPage() throws {
        try #require(Self.canRun, "CI must run this as root with setpriv and bwrap")
        let (dir, info) = try Self.appDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let ticks = dir.appendingPathComponent("vsync-ticks").path
        let phase = dir.appendingPathComponent("vsync-phase").path
        try LibvsyncTests.compile(LibvsyncTests.repository.appendingPathComponent("examples/vsync-ticks.c"), to: ticks)
        try LibvsyncTests.compile(LibvsyncTests.repository.appendingPathComponent("examples/vsync-phase.c"), to: phase)
        let libraryDir = URL(fileURLWithPath: try LibvsyncTests.library()).resolvingSymlinksInPath().deletingLastPathComponent().path

        let daemon = try DaemonProcess(hertz: 60)
        defer { _ = daemon.stop() }
        chmod(daemon.directory.path, 0o755)
        let sandbox = SeatClient.sandbox(binds: [daemon.directory.path], readOnly: [dir.path, libraryDir], appInfo: info)

        // Paced frames: each frame 4 ms before the vblank it is for.
        let paced = try SeatClient.runAs(
            uid: Self.appUser, gid: Self.appUser,
            sandbox + [ticks, "--socket", daemon.socketPath, "--fps", "60", "--frames", "5", "--work-ms", "4"])
        let frames = paced.output.split(separator: "\n").filter { $0.hasPrefix("seq ") }
        #expect(frames.count == 5, "\(paced.output)")
        #expect(frames.allSatisfy { $0.contains("target_seq") && $0.contains("synthetic") }, "\(paced.output)")
        // The sandbox's /dev has no dri: the ticks came through the socket alone.
        #expect(!paced.output.contains("/dev/dri"), "\(paced.output)")

        // The timing page: a sealed memfd passed over the socket, read with no message per frame.
        let page = try SeatClient.runAs(
            uid: Self.appUser, gid: Self.appUser, sandbox + [phase, "--socket", daemon.socketPath, "--frames", "10"])
        #expect(page.output.contains("10 wakes"), "\(page.output)")

        // vsyncd names the client by its app id, read from the sandbox's root.
        #expect(daemon.log.contains("uid \(Self.appUser) app \(Self.appID)"), "\(daemon.log)")
        for line in daemon.log.split(separator: "\n") where line.contains("app \(Self.appID)") { print("sandboxed: \(line)") }
    }

    @Test(.enabled(if: canRun || inCI, "needs root, setpriv and bubblewrap (Debian bubblewrap)"), .timeLimit(.minutes(1)))
    func oneAppHoldsAtMostHalfOfItsUsersConnections() throws {
        try #require(Self.canRun, "CI must run this as root with setpriv and bwrap")
        let (dir, info) = try Self.appDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let daemon = try DaemonProcess(hertz: 60, extra: ["--max-clients-per-user", "4"])
        defer { _ = daemon.stop() }
        chmod(daemon.directory.path, 0o755)
        let sandbox = SeatClient.sandbox(binds: [daemon.directory.path], appInfo: info)

        let app = try SeatClient.runAs(
            uid: Self.appUser, gid: Self.appUser, sandbox + ["/usr/bin/python3", "-c", SeatClient.script, daemon.socketPath, "3"])
        let lines = app.output.split(separator: "\n")
        #expect(lines.filter { $0 == "welcome" }.count == 2, "\(app.output)")
        #expect(
            app.output.contains("refused: app \(Self.appID) already has 2 connections, its share of uid \(Self.appUser)'s 4"),
            "\(app.output)")
        #expect(daemon.log.contains("app \(Self.appID) refused: app \(Self.appID) of uid \(Self.appUser) is at the per-app cap of 2"), "\(daemon.log)")

        // The same user outside the sandbox is held to the user's cap, not the app's, once the
        // app's connections are gone.
        #expect(waitUntil(timeout: 3) { Self.disconnects(of: Self.appID, in: daemon.log) == 2 }, "\(daemon.log)")
        let plain = try SeatClient.python(uid: Self.appUser, gid: Self.appUser, socket: daemon.socketPath, connections: 3)
        #expect(plain.output.split(separator: "\n").filter { $0 == "welcome" }.count == 3, "\(plain.output)")
    }

    /// Subscribes `count` times on one connection (HELLO version 1) and prints "subscribed" or
    /// "error: TEXT" for each.
    static let subscriber = """
        import socket, struct, sys
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        s.settimeout(3)
        s.connect(sys.argv[1])
        s.send(struct.pack("<HHIIHH32s", 1, 48, 0, 0x4E595356, 1, 1, b"subscriber"))
        assert struct.unpack_from("<H", s.recv(4096))[0] == 0x101
        for i in range(int(sys.argv[2])):
            s.send(struct.pack("<HHIIIBxxxI32sfff", 3, 68, 0, i + 1, 0, 0, 0, b"", 0, 0, 0))
            while True:
                m = s.recv(4096)
                t, = struct.unpack_from("<H", m)
                if t == 0x104:
                    print("subscribed", flush=True); break
                if t == 0x107:
                    print("error:", m[16:].decode(), flush=True); break
        """

    @Test(.enabled(if: canRun || inCI, "needs root, setpriv and bubblewrap (Debian bubblewrap)"), .timeLimit(.minutes(1)))
    func oneAppHoldsAtMostHalfOfItsUsersSubscriptions() throws {
        try #require(Self.canRun, "CI must run this as root with setpriv and bwrap")
        let (dir, info) = try Self.appDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let daemon = try DaemonProcess(hertz: 60, extra: ["--max-subscriptions-per-user", "4"])
        defer { _ = daemon.stop() }
        chmod(daemon.directory.path, 0o755)
        let sandbox = SeatClient.sandbox(binds: [daemon.directory.path], appInfo: info)
        let app = try SeatClient.runAs(
            uid: Self.appUser, gid: Self.appUser, sandbox + ["/usr/bin/python3", "-c", Self.subscriber, daemon.socketPath, "3"])
        let lines = app.output.split(separator: "\n")
        #expect(lines.filter { $0 == "subscribed" }.count == 2, "\(app.output)")
        #expect(app.output.contains("error: app \(Self.appID) holds 2 subscriptions, half of uid \(Self.appUser)'s limit"), "\(app.output)")
        // Outside the sandbox the user's own limit holds: four, once the app's subscriptions are gone.
        #expect(waitUntil(timeout: 3) { Self.disconnects(of: Self.appID, in: daemon.log) == 1 }, "\(daemon.log)")
        let plain = try SeatClient.runAs(
            uid: Self.appUser, gid: Self.appUser, ["/usr/bin/python3", "-c", Self.subscriber, daemon.socketPath, "5"])
        #expect(plain.output.split(separator: "\n").filter { $0 == "subscribed" }.count == 4, "\(plain.output)")
        #expect(plain.output.contains("error: uid \(Self.appUser) holds 4 subscriptions, the per-user limit"), "\(plain.output)")
    }
}
