import Glibc
import Testing
import VsyncClientCore
import VsyncCore

/// The server end of a socketpair, scripted by a test: it reads what the client sent and
/// writes exactly the server messages the test names (real wire bytes, VsyncCore's codec).
final class ScriptedServer {
    /// The server's end; the client gets the other one through its connector.
    private(set) var fd: Int32 = -1

    /// A connector that hands the client the other end of a fresh socketpair each time it
    /// connects, keeping this end as `fd` (the previous one is closed).
    func connector() -> VsyncClient.Connector {
        let box = FDBox()
        box.server = self
        return VsyncClient.Connector { _ in
            var fds: [Int32] = [-1, -1]
            let type = Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue)
            guard socketpair(AF_UNIX, type, 0, &fds) == 0 else { return -errno }
            box.server?.adopt(fds[1])
            return fds[0]
        }
    }

    /// Called with each new connection, after the client's end was handed out (to answer at once).
    var onConnect: ((ScriptedServer) -> Void)?

    private func adopt(_ fd: Int32) {
        if self.fd >= 0 { close(self.fd) }
        self.fd = fd
        onConnect?(self)
    }

    /// Closes the server end: the client sees the daemon go away.
    func hangUp() {
        if fd >= 0 { close(fd) }
        fd = -1
    }

    deinit { hangUp() }

    /// Every client message waiting, decoded.
    func received() throws -> [ClientMessage] {
        var out: [ClientMessage] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while fd >= 0 {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            if n <= 0 { break }
            out.append(try ClientMessage.decode(Array(buffer[0..<n])))
        }
        return out
    }

    func send(_ message: ServerMessage) {
        sendRaw(message.encoded())
    }

    func sendRaw(_ bytes: [UInt8]) {
        let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        #expect(n == bytes.count, "scripted server could not send \(bytes.count) bytes: errno \(errno)")
    }
}

/// Lets the connector closure reach the server without the server owning itself.
private final class FDBox: @unchecked Sendable {
    weak var server: ScriptedServer?
}
