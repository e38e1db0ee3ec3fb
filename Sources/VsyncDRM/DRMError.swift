import Glibc

/// A failed DRM operation: what was tried, on which device, and the errno the kernel gave.
///
/// `description` is the one line a user sees; it says what to do next.
public struct DRMError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        /// `/dev/dri` has no `card*` node.
        case noDevice
        /// EACCES/EPERM opening or using the node. `group` is the node's owning group, if known.
        case permissionDenied(group: String?)
        /// EINVAL on a vblank wait: the CRTC has no mode (display off or disconnected).
        case crtcOff(crtcID: UInt32)
        /// EOPNOTSUPP: the driver does not do vblank events.
        case noVBlankSupport
        /// ENODEV: the device went away (unplugged, driver unbound).
        case deviceGone
        /// EBUSY: a vblank wait timed out in the kernel.
        case timedOut
        /// No CRTC with that object id on this card; `valid` lists the ones there are.
        case unknownCRTC(crtcID: UInt32, valid: [UInt32])
        /// Anything else: see `errno`.
        case other
    }

    public var kind: Kind
    /// The errno the call failed with, 0 when the failure was not a syscall's.
    public var errno: Int32
    /// The device node, e.g. `/dev/dri/card0`.
    public var device: String
    /// The libdrm call or step that failed, e.g. `drmWaitVBlank`.
    public var operation: String

    public init(kind: Kind, errno: Int32, device: String, operation: String) {
        self.kind = kind
        self.errno = errno
        self.device = device
        self.operation = operation
    }

    /// Classifies an errno from `operation` on `device`. `crtcID` is the CRTC a vblank call was
    /// about: EINVAL then means the CRTC is off.
    public static func from(
        errno code: Int32, device: String, operation: String, crtcID: UInt32? = nil
    ) -> DRMError {
        let kind: Kind
        switch code {
        case EACCES, EPERM: kind = .permissionDenied(group: groupOwning(device))
        case EINVAL where crtcID != nil: kind = .crtcOff(crtcID: crtcID!)
        case EOPNOTSUPP: kind = .noVBlankSupport
        case ENODEV, ENXIO: kind = .deviceGone
        case EBUSY: kind = .timedOut
        default: kind = .other
        }
        return DRMError(kind: kind, errno: code, device: device, operation: operation)
    }

    public var description: String {
        switch kind {
        case .noDevice:
            return
                "no DRM device: /dev/dri has no card* node: this machine has no KMS display driver loaded (load one, or attach a display)"
        case .permissionDenied(let group):
            // A root-owned node (no udev rules, e.g. a bare VM) has no group worth joining.
            let fix =
                switch group {
                case nil, "root"?: "run as root, or have udev give it to group 'video' and add the user to that group"
                case let group?: "add the user to group '\(group)'"
                }
            return "permission denied on \(device) (\(operation)): \(fix)"
        case .crtcOff(let id):
            return
                "CRTC \(id) on \(device) is off: light the display (connect a monitor or set a mode) or pick another CRTC (vsync-probe list shows which are on)"
        case .noVBlankSupport:
            return
                "\(device) does not support vblank events (\(operation): \(Self.message(errno))): use another card (vsync-probe list shows each card's driver)"
        case .deviceGone:
            return "\(device) is gone (\(operation): \(Self.message(errno))): the device was unplugged or its driver unbound"
        case .timedOut:
            return
                "vblank wait on \(device) timed out (\(operation)): the display may be asleep; wake it or pick another CRTC (vsync-probe list shows which are on)"
        case .unknownCRTC(let id, let valid):
            let list = valid.isEmpty ? "none" : valid.map(String.init).joined(separator: ", ")
            return "no CRTC \(id) on \(device): valid CRTC ids are \(list) (see vsync-probe list)"
        case .other where errno == ENOENT && operation == "open":
            return "\(device) does not exist: run vsync-probe list to see the cards there are"
        case .other where errno == ENOTTY:
            return "\(device) is not a DRM device (\(operation): \(Self.message(errno))): pick a /dev/dri/card* node"
        case .other:
            return "\(operation) failed on \(device): \(Self.message(errno))"
        }
    }

    static func message(_ code: Int32) -> String {
        guard code != 0, let text = strerror(code) else { return "unknown error" }
        return String(cString: text)
    }

    /// The name of the group owning `path` (from stat), for the permission hint.
    static func groupOwning(_ path: String) -> String? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        guard let entry = getgrgid(info.st_gid), let name = entry.pointee.gr_name else {
            return String(info.st_gid)
        }
        return String(cString: name)
    }
}
