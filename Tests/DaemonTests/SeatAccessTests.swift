import Foundation
import Glibc
import Testing

/// Who may connect: the users who may already use the display. vsyncd judges each peer by its
/// access to the card node (owner, mode and the POSIX ACL logind's uaccess writes); here the node
/// is a file given with --access-node, its ACL set with setfacl, as uaccess sets /dev/dri/card0's.
@Suite("vsyncd seat access", .serialized)
struct SeatAccessTests {
    static let seatUser: UInt32 = 61001
    static let canRun = SeatClient.canSwitchUsers && SeatClient.hasSetfacl
    static let inCI = ProcessInfo.processInfo.environment["CI"] == "true"

    /// A root-owned node, mode 0660 group root, no ACL: as a card before any session starts.
    static func node(in directory: URL) throws -> String {
        let path = directory.appendingPathComponent("card0").path
        try #require(FileManager.default.createFile(atPath: path, contents: nil))
        chmod(path, 0o660)
        chmod(directory.path, 0o755)
        return path
    }

    static func setfacl(_ arguments: [String]) throws {
        let result = try Command.run(["setfacl"] + arguments)
        try #require(result.status == 0, "setfacl \(arguments): \(result.output)")
    }

    @Test(.enabled(if: canRun || inCI, "needs root, setpriv and setfacl (Debian acl) to run clients as other users"))
    func theSeatUserConnectsWhileTheACLGrantsItOthersAreRefusedWithOneLine() throws {
        try #require(Self.canRun, "CI must run this as root with setpriv and setfacl")
        let daemon = try DaemonProcess(hertz: 60, extra: ["--group", "nogroup"])
        defer { _ = daemon.stop() }
        let node = try Self.node(in: daemon.directory)
        let judged = try DaemonProcess(hertz: 60, extra: ["--group", "nogroup", "--access-node", node])
        defer { _ = judged.stop() }
        chmod(judged.directory.path, 0o755)

        // No session yet: refused, with the line saying why and what to do, and logged with pid and uid.
        let before = try SeatClient.python(uid: Self.seatUser, gid: Self.seatUser, socket: judged.socketPath)
        let line =
            "vsyncd: uid \(Self.seatUser) may not use the display: it has no read-write access to \(node) (not the active seat's user, not in group nogroup); log in on the seat or add the user to group nogroup"
        #expect(before.output.contains("refused: \(line)"), "\(before.output)")
        if let pid = before.pid {
            #expect(waitUntil(timeout: 2) { judged.log.contains("client pid \(pid) uid \(Self.seatUser) refused: \(line)") }, "\(judged.log)")
        }

        // Through the client library (vsync-probe): the user reads the same line.
        let probe = try SeatClient.runAs(
            uid: Self.seatUser, gid: Self.seatUser,
            [try DaemonProcess.binary("vsync-probe"), "follow", "--socket", judged.socketPath, "--frames", "1", "--timeout", "3"])
        #expect(probe.output.contains(line), "vsync-probe: \(probe.output)")

        // The session starts: uaccess grants the user rw on the node.
        try Self.setfacl(["-m", "u:\(Self.seatUser):rw", node])
        let during = try SeatClient.python(uid: Self.seatUser, gid: Self.seatUser, socket: judged.socketPath)
        #expect(during.output.contains("welcome") && during.output.contains("tick"), "\(during.output)")
        let other = try SeatClient.python(uid: Self.seatUser + 1, gid: Self.seatUser + 1, socket: judged.socketPath)
        #expect(other.output.contains("refused: vsyncd: uid \(Self.seatUser + 1) may not use the display"), "a user with no session: \(other.output)")

        // The session ends: uaccess takes the entry away, and the next connection is refused.
        try Self.setfacl(["-x", "u:\(Self.seatUser)", node])
        let after = try SeatClient.python(uid: Self.seatUser, gid: Self.seatUser, socket: judged.socketPath)
        #expect(after.output.contains("refused: \(line)"), "after the session: \(after.output)")

        // Without --access-node the timer source lets everyone in: its ticks are a clock's.
        chmod(daemon.directory.path, 0o755)
        let timer = try SeatClient.python(uid: Self.seatUser + 1, gid: Self.seatUser + 1, socket: daemon.socketPath)
        #expect(timer.output.contains("welcome") && timer.output.contains("tick"), "timer source: \(timer.output)")
    }

    @Test(.enabled(if: canRun || inCI, "needs root, setpriv and setfacl (Debian acl) to run clients as other users"))
    func membersOfTheGroupAndTheNodesGroupConnectWithoutAnACL() throws {
        try #require(Self.canRun, "CI must run this as root with setpriv and setfacl")
        guard let nogroup = getgrnam("nogroup")?.pointee.gr_gid else {
            Issue.record("no group 'nogroup' to test with")
            return
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("seat-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let node = try Self.node(in: directory)
        // A seatd-style node: group 'seatgroup' (gid 61100), mode 0660.
        chown(node, 0, 61100)
        let daemon = try DaemonProcess(hertz: 60, extra: ["--group", "nogroup", "--access-node", node])
        defer { _ = daemon.stop() }
        chmod(daemon.directory.path, 0o755)
        var st = stat()
        try #require(stat(daemon.socketPath, &st) == 0)
        #expect(st.st_mode & 0o777 == 0o666, "the daemon decides, not the socket's mode: \(String(st.st_mode & 0o777, radix: 8))")

        let member = try SeatClient.python(uid: Self.seatUser, gid: Self.seatUser, groups: [nogroup], socket: daemon.socketPath)
        #expect(member.output.contains("welcome") && member.output.contains("tick"), "a member of --group: \(member.output)")
        let nodeGroup = try SeatClient.python(uid: Self.seatUser, gid: Self.seatUser, groups: [61100], socket: daemon.socketPath)
        #expect(nodeGroup.output.contains("welcome"), "a member of the node's group: \(nodeGroup.output)")
        let outsider = try SeatClient.python(uid: Self.seatUser, gid: Self.seatUser, socket: daemon.socketPath)
        #expect(outsider.output.contains("refused: vsyncd: uid \(Self.seatUser) may not use the display"), "\(outsider.output)")
    }
}
