import Glibc

/// The few socket calls the connection needs, each returning errno rather than throwing, so the
/// reader thread can decide what a failure means (no daemon, retry, give up).
enum UnixSocket {
    enum ConnectResult {
        case connected(Int32)
        /// Could not connect now; `errno` says why.
        case failed(Int32)
    }

    /// A non-blocking, close-on-exec SOCK_SEQPACKET connection to `path`. Never blocks: a full
    /// listen backlog comes back as EAGAIN, which the caller retries later.
    static func connect(path: String) -> ConnectResult {
        var addr = sockaddr_un()
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: addr.sun_path) else { return .failed(ENAMETOOLONG) }
        let type = Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue)
        let fd = socket(AF_UNIX, type, 0)
        guard fd >= 0 else { return .failed(errno) }
        addr.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        if rc == 0 { return .connected(fd) }
        let err = errno
        // A Unix socket connect completes at once or not at all; EINPROGRESS does not happen
        // here, but if it did the first send would tell.
        if err == EINPROGRESS { return .connected(fd) }
        close(fd)
        return .failed(err)
    }

    enum SendResult { case sent, wouldBlock, failed(Int32) }

    static func send(_ fd: Int32, _ bytes: [UInt8]) -> SendResult {
        let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        if n >= 0 { return .sent }
        let err = errno
        if err == EAGAIN || err == EWOULDBLOCK { return .wouldBlock }
        if err == EINTR { return send(fd, bytes) }
        return .failed(err)
    }
}
