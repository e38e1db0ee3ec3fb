import VsyncCore

/// A display mode as the kernel reports it: the exact timings plus libdrm's type bits.
public struct Mode: Sendable, Hashable {
    public var timings: ModeTimings
    /// `DRM_MODE_TYPE_*` bits (preferred, driver, user...).
    public var type: UInt32

    public init(timings: ModeTimings, type: UInt32 = 0) {
        self.timings = timings
        self.type = type
    }

    public var name: String { timings.name }
    /// The exact refresh computed from the timings, never from the rounded `vrefresh`.
    public var refreshRate: RefreshRate? { timings.refreshRate }
    public var isPreferred: Bool { type & 0x8 != 0 }  // DRM_MODE_TYPE_PREFERRED

    /// "1024x768 59.940144 Hz": the size and the exact refresh, with sub-millihertz digits.
    public var summary: String {
        let size = "\(timings.hdisplay)x\(timings.vdisplay)\(timings.isInterlaced ? "i" : "")"
        guard let rate = refreshRate else { return "\(size) (no refresh)" }
        return "\(size) \(Self.hertzText(rate.hertz)) Hz"
    }

    /// Hertz with six decimals.
    public static func hertzText(_ hertz: Double) -> String { DecimalText.fixed(hertz, places: 6) }
}

/// Whether something is plugged into a connector, as the kernel last probed it.
public enum ConnectorStatus: String, Sendable, Hashable, Codable {
    case connected, disconnected, unknown
}

/// A connector (a physical or virtual output), named the way the kernel names it in sysfs.
public struct Connector: Sendable, Hashable, Identifiable {
    public var id: UInt32
    /// `DRM_MODE_CONNECTOR_*`.
    public var type: UInt32
    /// The index among connectors of this type, from 1.
    public var typeIndex: UInt32
    public var status: ConnectorStatus
    public var modes: [Mode]
    /// The encoder currently driving it, if any.
    public var encoderID: UInt32?
    /// The CRTC feeding that encoder, if any.
    public var crtcID: UInt32?

    public init(
        id: UInt32, type: UInt32, typeIndex: UInt32, status: ConnectorStatus,
        modes: [Mode], encoderID: UInt32?, crtcID: UInt32?
    ) {
        self.id = id
        self.type = type
        self.typeIndex = typeIndex
        self.status = status
        self.modes = modes
        self.encoderID = encoderID
        self.crtcID = crtcID
    }

    /// `Virtual-1`, `HDMI-A-1`, `DP-2`, as in `/sys/class/drm/card0-HDMI-A-1`.
    public var name: String { "\(Self.typeName(type))-\(typeIndex)" }

    /// The kernel's connector type names (drm_connector.c, drm_connector_enum_list).
    public static func typeName(_ type: UInt32) -> String {
        let names = [
            "Unknown", "VGA", "DVI-I", "DVI-D", "DVI-A", "Composite", "SVIDEO", "LVDS",
            "Component", "DIN", "DP", "HDMI-A", "HDMI-B", "TV", "eDP", "Virtual", "DSI", "DPI",
            "Writeback", "SPI", "USB",
        ]
        return Int(type) < names.count ? names[Int(type)] : "Unknown"
    }
}

/// An encoder: the link from a CRTC to connectors.
public struct Encoder: Sendable, Hashable, Identifiable {
    public var id: UInt32
    public var type: UInt32
    public var crtcID: UInt32?
    /// Bit i set: the CRTC at pipe index i can drive it.
    public var possibleCRTCs: UInt32

    public init(id: UInt32, type: UInt32, crtcID: UInt32?, possibleCRTCs: UInt32) {
        self.id = id
        self.type = type
        self.crtcID = crtcID
        self.possibleCRTCs = possibleCRTCs
    }
}

/// A CRTC: the scanout engine whose vertical blanking we time.
public struct CRTC: Sendable, Hashable, Identifiable {
    /// The KMS object id (what `drmCrtcQueueSequence` and `--crtc` take).
    public var id: UInt32
    /// Position in the card's resources: the "pipe" legacy vblank calls encode.
    public var pipe: Int
    /// The current mode, nil when none is set.
    public var mode: Mode?
    /// The framebuffer scanned out, 0 for none.
    public var framebufferID: UInt32

    public init(id: UInt32, pipe: Int, mode: Mode?, framebufferID: UInt32 = 0) {
        self.id = id
        self.pipe = pipe
        self.mode = mode
        self.framebufferID = framebufferID
    }

    /// Has a valid mode, so vblank runs. (Legacy KMS has no separate "active" bit to read.)
    public var isActive: Bool { mode != nil }
}

/// One snapshot of a card's KMS objects.
public struct CardResources: Sendable, Hashable {
    public var connectors: [Connector]
    public var encoders: [Encoder]
    public var crtcs: [CRTC]

    public init(connectors: [Connector], encoders: [Encoder], crtcs: [CRTC]) {
        self.connectors = connectors
        self.encoders = encoders
        self.crtcs = crtcs
    }

    public func crtc(id: UInt32) -> CRTC? { crtcs.first { $0.id == id } }
    /// The connectors this CRTC currently drives.
    public func connectors(of crtc: CRTC) -> [Connector] { connectors.filter { $0.crtcID == crtc.id } }
}
