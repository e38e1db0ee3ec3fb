import Foundation
import Glibc
import Testing

/// Clients as other users and inside a Flatpak-like sandbox, for the seat-access tests: real
/// processes, switched with setpriv, sandboxed with bubblewrap.
enum SeatClient {
    static let canSwitchUsers = geteuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv")
    static let hasBubblewrap = FileManager.default.isExecutableFile(atPath: "/usr/bin/bwrap")
    static let hasSetfacl = FileManager.default.isExecutableFile(atPath: "/usr/bin/setfacl")

    /// Opens `connections` connections, sends HELLO (version 1) on each and prints, per
    /// connection, "welcome" or "refused: TEXT"; then subscribes on the first welcomed one and
    /// prints "tick" at its first TICK. All stay open until the end. A connection refused at
    /// accept is closed before the HELLO goes: the send fails, the REFUSED is still there to read.
    static let script = """
        import os, socket, struct, sys
        print("pid", os.getpid(), flush=True)
        path, count = sys.argv[1], int(sys.argv[2])
        held = []
        for _ in range(count):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            s.settimeout(3)
            try:
                s.connect(path)
            except OSError as e:
                print("connect:", e.strerror, flush=True); continue
            try:
                s.send(struct.pack("<HHIIHH32s", 1, 48, 0, 0x4E595356, 1, 1, b"seat-client"))
            except OSError:
                pass  # refused at accept: the REFUSED waits to be read
            try:
                m = s.recv(4096)
            except ConnectionResetError:
                m = s.recv(4096)  # closed with our HELLO unread: the reset is reported first, then the REFUSED
            t, = struct.unpack_from("<H", m)
            if t == 0x102:
                print("refused:", m[12:].decode(), flush=True)
            else:
                print("welcome" if t == 0x101 else "type %#x" % t, flush=True)
                held.append(s)
        if held:
            s = held[0]
            s.send(struct.pack("<HHIIIBxxxI32sfff", 3, 68, 0, 1, 0, 0, 0, b"", 0, 0, 0))
            for _ in range(20):
                t, = struct.unpack_from("<H", s.recv(4096))
                if t == 0x105:
                    print("tick", flush=True); break
        """

    /// Flatpak's sandbox, as far as vsyncd can tell: its own user, pid, ipc, net and uts
    /// namespaces, a minimal /dev (no /dri), /usr read-only, and only `binds` (read-write) and
    /// `readOnly` paths from the host. `appInfo` becomes the sandbox's /.flatpak-info.
    static func sandbox(binds: [String], readOnly: [String] = [], appInfo: String?) -> [String] {
        var arguments = [
            "/usr/bin/bwrap", "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-net", "--unshare-uts",
            "--die-with-parent", "--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib",
            "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/bin", "/bin", "--proc", "/proc", "--dev", "/dev",
        ]
        for path in readOnly { arguments += ["--ro-bind", path, path] }
        for path in binds { arguments += ["--bind", path, path] }
        if let appInfo { arguments += ["--ro-bind", appInfo, "/.flatpak-info"] }
        return arguments + ["--"]
    }

    /// Runs `command` as uid/gid with no supplementary groups (or `groups`), bounded to `seconds`.
    static func runAs(
        uid: UInt32, gid: UInt32, groups: [UInt32] = [], seconds: Double = 15, _ command: [String]
    ) throws -> (output: String, pid: Int?) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        let groupArguments = groups.isEmpty ? ["--clear-groups"] : ["--groups", groups.map(String.init).joined(separator: ",")]
        process.arguments = ["--reuid=\(uid)", "--regid=\(gid)"] + groupArguments + command
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let deadline = Date().addingTimeInterval(seconds)
        while process.isRunning && Date() < deadline { usleep(20_000) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let pid = output.split(separator: "\n").first { $0.hasPrefix("pid ") }.flatMap { Int($0.dropFirst(4)) }
        return (output, pid)
    }

    /// The protocol client as uid/gid, `connections` connections.
    static func python(uid: UInt32, gid: UInt32, groups: [UInt32] = [], socket: String, connections: Int = 1) throws -> (output: String, pid: Int?) {
        try runAs(uid: uid, gid: gid, groups: groups, ["/usr/bin/python3", "-c", script, socket, String(connections)])
    }
}
