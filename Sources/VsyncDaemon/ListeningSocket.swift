import Glibc

/// The daemon's listening SOCK_SEQPACKET socket: made and bound here, or passed by systemd.
/// Owns its fd, and the path it bound (unlinked when it goes).
final class ListeningSocket {
    let fd: FileDescriptor
    /// The path to unlink on exit; nil when systemd owns the socket.
    let ownedPath: String?
    let description: String

    private init(fd: consuming FileDescriptor, ownedPath: String?, description: String) {
        self.fd = fd
        self.ownedPath = ownedPath
        self.description = description
    }

    deinit {
        if let ownedPath { unlink(ownedPath) }
    }

    /// Socket activation: `LISTEN_PID` is us and `LISTEN_FDS` ≥ 1 → fd 3, which must be an
    /// AF_UNIX SOCK_SEQPACKET socket. Nil when not activated.
    static func activated(environment: [String: String]) throws(DaemonError) -> ListeningSocket? {
        guard let pid = environment["LISTEN_PID"].flatMap(Int32.init), pid == getpid(),
            let count = environment["LISTEN_FDS"].flatMap(Int.init), count >= 1
        else { return nil }
        let fd: Int32 = 3  // SD_LISTEN_FDS_START
        unsetenv("LISTEN_PID")
        unsetenv("LISTEN_FDS")
        unsetenv("LISTEN_FDNAMES")
        var type: Int32 = 0
        var domain: Int32 = 0
        var len = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 else {
            throw .activatedNotASocket(errno: errno)
        }
        len = socklen_t(MemoryLayout<Int32>.size)
        _ = getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len)
        guard type == Int32(SOCK_SEQPACKET.rawValue), domain == AF_UNIX else { throw .activatedWrongKind }
        let flags = fcntl(fd, F_GETFL)
        _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        return ListeningSocket(fd: FileDescriptor(fd), ownedPath: nil, description: "fd 3 from systemd")
    }

    /// Binds `path` (removing a stale socket file), mode 0666: who may connect is decided at
    /// accept (`DisplayAccess`), by the access the peer has to the display.
    static func bind(path: String) throws(DaemonError) -> ListeningSocket {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard !bytes.isEmpty, bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
            throw .socketPathTooLong(path: path, bytes: bytes.count)
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, b) in bytes.enumerated() { raw[i] = b }
        }

        // Make the parent directory if missing (e.g. /run/vsyncd without systemd's RuntimeDirectory=).
        if let slash = path.lastIndex(of: "/"), slash != path.startIndex {
            let dir = String(path[..<slash])
            if access(dir, F_OK) != 0 { mkdir(dir, 0o755) }
        }

        try removeStale(path: path, address: address)

        let made = socket(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard made >= 0 else { throw .socketUnavailable(errno: errno) }
        let fd = FileDescriptor(made)
        // Bind with a known umask so the socket's mode does not depend on the caller's.
        let oldMask = umask(0o111)
        let rc = withUnsafePointer(to: &address) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.bind(fd.raw, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        let bindErrno = errno
        umask(oldMask)
        guard rc == 0 else { throw .bind(path: path, errno: bindErrno) }
        chmod(path, 0o666)
        guard listen(fd.raw, 128) == 0 else {
            let e = errno
            unlink(path)
            throw .listen(path: path, errno: e)
        }
        return ListeningSocket(fd: fd, ownedPath: path, description: path)
    }

    /// A leftover socket file from a dead daemon is removed; a live daemon is an error.
    private static func removeStale(path: String, address: sockaddr_un) throws(DaemonError) {
        var st = stat()
        guard lstat(path, &st) == 0 else { return }
        guard (st.st_mode & S_IFMT) == S_IFSOCK else {
            throw .pathTaken(path: path)
        }
        let probe = socket(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard probe >= 0 else {
            unlink(path)
            return
        }
        let prober = FileDescriptor(probe)
        var addr = address
        let rc = withUnsafePointer(to: &addr) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(prober.raw, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        if rc == 0 { throw .alreadyServing(path: path) }
        unlink(path)
    }
}
