import Glibc
import VsyncCore

/// Who is on the other end of an accepted connection: SO_PEERCRED's pid, uid and gid,
/// SO_PEERGROUPS' supplementary groups, and the app id of a sandboxed (Flatpak) client.
struct Peer {
    var pid: Int32
    var identity: PeerIdentity
    /// From `/proc/PID/root/.flatpak-info`, else the name of the Flatpak app's systemd scope in
    /// `/proc/PID/cgroup` (`lookUpAppID`); nil for a process outside a sandbox, or before it was
    /// looked up.
    var appID: String?

    var uid: UInt32 { identity.uid }

    /// "pid 12 uid 1000" or "pid 12 uid 1000 app org.example.App", as the log names it.
    var label: String { "pid \(pid) uid \(uid)" + (appID.map { " app \($0)" } ?? "") }

    /// SO_PEERGROUPS (Linux 4.13); the asm-generic value, the same on every architecture Swift runs on.
    private static let peerGroupsOption: Int32 = 59

    static func read(socket fd: Int32) -> Peer {
        var cred = (pid: Int32(0), uid: UInt32.max, gid: UInt32.max)  // struct ucred
        var len = socklen_t(MemoryLayout.size(ofValue: cred))
        _ = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len)
        let identity = PeerIdentity(uid: cred.uid, gid: cred.gid, groups: groups(socket: fd))
        return Peer(pid: cred.pid, identity: identity, appID: nil)
    }

    /// Reads the app id: only for a connection past the cheap checks, or a refusal about to be
    /// logged, so a flood of refused connections costs no file reads.
    mutating func lookUpAppID() { appID = Self.appID(pid: pid) }

    /// `label` with the app id looked up.
    func labelWithAppID() -> String {
        var peer = self
        peer.lookUpAppID()
        return peer.label
    }

    /// The peer's supplementary groups as they were at connect(). ERANGE says how many there are.
    private static func groups(socket fd: Int32) -> [UInt32] {
        var count = 64
        for _ in 0..<2 {
            var gids = [UInt32](repeating: 0, count: count)
            var len = socklen_t(count * MemoryLayout<UInt32>.size)
            let rc = gids.withUnsafeMutableBytes { getsockopt(fd, SOL_SOCKET, peerGroupsOption, $0.baseAddress, &len) }
            if rc == 0 { return Array(gids.prefix(Int(len) / MemoryLayout<UInt32>.size)) }
            guard errno == ERANGE else { return [] }
            count = Int(len) / MemoryLayout<UInt32>.size
        }
        return []
    }

    /// The app id in the client's sandbox root, else in its systemd scope's name: the packaged
    /// unit's dynamic user may not enter another user's root, but may read its cgroup. The pid
    /// may have been reused by the time it is read (PipeWire has the same window); it names the
    /// client in logs and counts it against an app's share, but never grants access. The root is
    /// read only where no FUSE mount could stall the read; the kernel answers the cgroup alone.
    private static func appID(pid: Int32) -> String? {
        guard pid > 0 else { return nil }
        if let mounts = readSmall("/proc/\(pid)/mountinfo", limit: 1 << 18),
            FlatpakInfo.isSafeToRead(mountinfo: mounts),
            let info = readSmall("/proc/\(pid)/root/.flatpak-info", limit: 8192),
            let name = FlatpakInfo.applicationName(in: info)
        {
            return name
        }
        return readSmall("/proc/\(pid)/cgroup", limit: 8192).flatMap(FlatpakInfo.applicationName(inCgroup:))
    }

    /// Up to `limit` bytes of a file (a regular file only: never a FIFO or a device), or nil.
    private static func readSmall(_ path: String, limit: Int) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG else { return nil }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 8192)
        while bytes.count < limit {
            let want = min(chunk.count, limit - bytes.count)
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, want) }
            guard n > 0 else { break }
            bytes += chunk.prefix(n)
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
