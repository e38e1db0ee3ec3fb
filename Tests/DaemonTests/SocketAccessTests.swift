import Foundation
import Glibc
import Testing

extension VsyncdTests.BadInput {
    // Who may connect: the socket is open to all (0666) and the daemon decides at accept;
    // peers are logged by pid and uid. SeatAccessTests covers the decision itself.

    static let canSwitchUsers = geteuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv")
    static let inCI = ProcessInfo.processInfo.environment["CI"] == "true"
    @Test func socketIsMode0666AndTheDaemonDecides() throws {
        let daemon = try DaemonProcess(hertz: 60)
        var st = stat()
        try #require(stat(daemon.socketPath, &st) == 0, "stat \(daemon.socketPath): \(String(cString: strerror(errno)))")
        #expect(st.st_mode & S_IFMT == S_IFSOCK)
        #expect(st.st_mode & 0o7777 == 0o666, "socket mode is \(String(st.st_mode & 0o7777, radix: 8)), documented 0666")
        if getgrnam("video") == nil {
            #expect(daemon.log.contains("group 'video'"), "no group 'video' and no warning about it")
        }
        // The daemon logs each peer's pid and uid (SO_PEERCRED).
        let client = try RawClient(path: daemon.socketPath)
        try client.handshake()
        #expect(waitUntil(timeout: 2) { daemon.log.contains("client connected: pid \(getpid()) uid \(getuid())") })
    }

    /// Clients as another user: one in the daemon's --group connects and gets ticks without any
    /// access to /dev/dri; one outside it, with no access to the node judged, is refused by the
    /// daemon (the socket itself is open). Needs root to switch users (setpriv). Outside CI,
    /// without root it is skipped, visibly; in CI (CI=true) it must run, so there it fails instead.
    @Test(.enabled(if: Self.canSwitchUsers || Self.inCI, "needs root and /usr/bin/setpriv to run clients as other users"))
    func onlyTheGroupMayConnectAndNeedsNoDRMAccess() throws {
        try #require(Self.canSwitchUsers, "CI must run this test as root with setpriv (util-linux): it cannot check the group otherwise")
        guard let nogroup = getgrnam("nogroup")?.pointee.gr_gid else {
            Issue.record("no group 'nogroup' to test with"); return
        }
        // The group is 'nogroup' here: a group with no device access at all. The node judged is
        // root's alone (0600), so only root and the group pass.
        let node = FileManager.default.temporaryDirectory.appendingPathComponent("node-\(UUID().uuidString.prefix(8))").path
        try #require(FileManager.default.createFile(atPath: node, contents: nil, attributes: [.posixPermissions: 0o600]))
        defer { unlink(node) }
        let daemon = try DaemonProcess(hertz: 60, extra: ["--group", "nogroup", "--access-node", node])
        chmod(daemon.directory.path, 0o755)

        let member = try runAs(uid: 65534, gid: nogroup, socket: daemon.socketPath)
        #expect(member.output.contains("welcome"), "a member of the group: \(member.output)")
        #expect(member.output.contains("tick"), "a member of the group got no tick: \(member.output)")
        #expect(member.output.contains("dri-open: no"), "the client could open /dev/dri: \(member.output)")
        if let pid = member.pid {
            #expect(daemon.log.contains("client connected: pid \(pid) uid 65534"), "the peer's pid and uid are not logged")
        }
        let outsider = try SeatClient.python(uid: 65534, gid: 1, socket: daemon.socketPath)
        #expect(outsider.output.contains("refused: vsyncd: uid 65534 may not use the display"), "a user outside the group: \(outsider.output)")
    }
    /// Runs a Python protocol client as uid/gid (no supplementary groups) with setpriv.
    /// Output: "EACCES" if the connect is refused, else the WELCOME's type, "tick", and
    /// whether /dev/dri/card0 could be opened.
    func runAs(uid: UInt32, gid: UInt32, socket: String) throws -> (output: String, pid: Int?) {
        let script = """
            import os, socket, struct, sys
            print("pid", os.getpid(), flush=True)
            try:
                fd = os.open("/dev/dri/card0", os.O_RDWR); print("dri-open: yes")
            except OSError:
                print("dri-open: no")
            s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            s.settimeout(3)
            try:
                s.connect(sys.argv[1])
            except PermissionError:
                print("EACCES"); sys.exit(0)
            s.send(struct.pack("<HHIIHH32s", 1, 48, 0, 0x4E595356, 1, 1, b"setpriv-client"))
            t, = struct.unpack_from("<H", s.recv(4096))
            print("welcome" if t == 0x101 else "type %#x" % t)
            s.send(struct.pack("<HHIIIBxxxI32sfff", 3, 68, 0, 1, 0, 0, 0, b"", 0, 0, 0))
            for _ in range(20):
                t, = struct.unpack_from("<H", s.recv(4096))
                if t == 0x105:
                    print("tick"); break
            """
        // Bounded: the script's own socket timeout is 3 s.
        return try SeatClient.runAs(uid: uid, gid: gid, seconds: 10, ["/usr/bin/python3", "-c", script, socket])
    }
}
