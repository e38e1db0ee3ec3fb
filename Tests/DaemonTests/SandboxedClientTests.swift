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

        // The same user outside the sandbox is held to the user's cap, not the app's.
        let plain = try SeatClient.python(uid: Self.appUser, gid: Self.appUser, socket: daemon.socketPath, connections: 3)
        #expect(plain.output.split(separator: "\n").filter { $0 == "welcome" }.count == 3, "\(plain.output)")
    }
}
