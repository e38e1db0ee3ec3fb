import CLinux
import Glibc

/// sd_notify without libsystemd: datagrams to `$NOTIFY_SOCKET` (a path, or "@name" abstract).
final class SystemdNotifier {
    private let socket: FileDescriptor
    private var address = sockaddr_un()
    private var addressLength: socklen_t = 0
    /// Half of `$WATCHDOG_USEC`, in ns, when systemd asked for keep-alives.
    let watchdogIntervalNs: UInt64?

    init?(environment: [String: String]) {
        if let usec = environment["WATCHDOG_USEC"].flatMap(UInt64.init), usec > 0,
            environment["WATCHDOG_PID"].flatMap(Int32.init).map({ $0 == getpid() }) ?? true
        {
            watchdogIntervalNs = usec * 1000 / 2
        } else {
            watchdogIntervalNs = nil
        }
        guard let path = environment["NOTIFY_SOCKET"], !path.isEmpty else { return nil }
        var bytes = Array(path.utf8)
        if bytes.first == UInt8(ascii: "@") { bytes[0] = 0 }
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return nil }
        let fd = Glibc.socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        socket = FileDescriptor(fd)
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, b) in bytes.enumerated() { raw[i] = b }
        }
        addressLength = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count + (bytes.first == 0 ? 0 : 1))
    }

    /// Sends "KEY=value\n…"; failures are ignored (systemd may not be listening any more).
    func notify(_ state: String) {
        var addr = address
        let len = addressLength
        _ = Array(state.utf8).withUnsafeBytes { buf in
            withUnsafePointer(to: &addr) { p in
                p.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
                    sendto(socket.raw, buf.baseAddress, buf.count, Int32(MSG_NOSIGNAL), sa, len)
                }
            }
        }
    }
}
