import Glibc

/// An open file descriptor the daemon owns: closed once, when its owner (a client, a timer, the
/// listening socket, the epoll set) goes. `raw` is for system calls and epoll's table; nothing
/// else closes it, and it cannot be copied, so no descriptor is closed twice or leaked.
struct FileDescriptor: ~Copyable {
    let raw: Int32

    /// Takes `raw` (≥ 0) over.
    init(_ raw: Int32) { self.raw = raw }

    /// `open(path, flags | O_CLOEXEC)`, nil if it failed (errno says why).
    init?(opening path: String, _ flags: Int32) {
        let fd = open(path, flags | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        raw = fd
    }

    deinit { close(raw) }
}
