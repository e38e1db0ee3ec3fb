import CLinux
import Glibc

/// The kernel's uevents (NETLINK_KOBJECT_UEVENT, the kernel's multicast group, as udev and
/// compositors listen): a DRM `HOTPLUG=1` says a connector changed. Owns its fd.
///
/// A CRTC lit by a mode set on a card already open sends no uevent, so the daemon still re-reads
/// the cards while a subscription waits for a display; this only makes plugging in a monitor
/// (or a card appearing) show at once.
final class UeventSocket {
    let socket: FileDescriptor

    var fd: Int32 { socket.raw }

    /// Nil, with the reason, where netlink is not allowed (a sandbox without AF_NETLINK).
    init?(failure: inout String) {
        let fd = Glibc.socket(
            AF_NETLINK, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), NETLINK_KOBJECT_UEVENT)
        guard fd >= 0 else {
            failure = "socket(AF_NETLINK): \(errnoText())"
            return nil
        }
        let socket = FileDescriptor(fd)
        var address = sockaddr_nl()
        address.nl_family = sa_family_t(AF_NETLINK)
        address.nl_groups = 1  // the kernel's events, not udev's re-broadcast
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socket.raw, $0, socklen_t(MemoryLayout<sockaddr_nl>.size)) }
        }
        guard bound == 0 else {
            failure = "bind(NETLINK_KOBJECT_UEVENT): \(errnoText())"
            return nil
        }
        self.socket = socket
    }

    /// Reads every waiting uevent; true if one was about DRM (a hotplug, a card added or removed).
    func drainForDRM() -> Bool {
        var buffer = [UInt8](repeating: 0, count: 8192)
        var drm = false
        while true {
            let received = try? nonBlocking("recv") {
                buffer.withUnsafeMutableBytes { recv(socket.raw, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            }
            guard let n = received, n > 0 else { return drm }
            // "ACTION@DEVPATH\0KEY=VALUE\0…": the one that matters here is SUBSYSTEM=drm.
            if !drm { drm = Self.isDRM(buffer[0..<n]) }
        }
    }

    static func isDRM(_ message: ArraySlice<UInt8>) -> Bool {
        message.split(separator: 0).contains { $0.elementsEqual("SUBSYSTEM=drm".utf8) }
    }
}
