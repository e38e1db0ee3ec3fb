// The messages' bodies. Byte layouts are in docs/PROTOCOL.md and in the codec
// (ClientMessage.swift, ServerMessage.swift, Tick+Wire.swift; the display record in MessageHeader.swift).

/// HELLO: the client's first message, offering a range of protocol versions.
public struct Hello: Sendable, Equatable {
    public var minVersion: UInt16
    public var maxVersion: UInt16
    /// For the daemon's log; at most 32 bytes of UTF-8 on the wire.
    public var clientName: String
    public init(minVersion: UInt16, maxVersion: UInt16, clientName: String) {
        self.minVersion = minVersion
        self.maxVersion = maxVersion
        self.clientName = clientName
    }
}

public struct ServerFlags: OptionSet, Sendable, Hashable {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }
    /// The daemon runs on the timer source (`--source timer:HZ`), not real vblanks.
    public static let syntheticSource = ServerFlags(rawValue: 1 << 0)
}

/// WELCOME: the handshake succeeded at `version`.
public struct Welcome: Sendable, Equatable {
    public var version: UInt16
    public var serverFlags: ServerFlags
    public var serverPID: UInt32
    public init(version: UInt16, serverFlags: ServerFlags, serverPID: UInt32) {
        self.version = version
        self.serverFlags = serverFlags
        self.serverPID = serverPID
    }
}

public enum RefusalCode: UInt16, Sendable, CaseIterable {
    case versionUnsupported = 1
    case tooManyClients = 2
    case badHandshake = 3
}

/// REFUSED: the handshake failed; the server closes the connection after sending it.
public struct Refusal: Sendable, Equatable {
    public var code: RefusalCode
    public var message: String
    public init(code: RefusalCode, message: String) {
        self.code = code
        self.message = message
    }
}

/// Which display a subscription wants.
public enum DisplaySelector: Sendable, Equatable, Hashable {
    /// The primary display, as the daemon picks it (the one whose record is flagged
    /// `.primary`): the built-in panel (eDP, LVDS, DSI) while it is lit, else the first lit
    /// display in the kernel's order (cards by number, then connectors); none while all are off.
    case primary
    case crtc(UInt32)
    /// A connector name such as "Virtual-1", "HDMI-A-1", or "timer".
    case connector(String)
    /// A display id from DISPLAY_LIST.
    case display(UInt32)
    /// A CRTC, connector or the primary display on a named card, or an EDID identity
    /// (protocol 3; see DisplayMatch.swift for the syntax).
    case match(DisplayMatch)

    /// Whether a display it names could still appear (or come back): `primary`, connector
    /// names and matches can; a bare CRTC id or a display id names what the daemon reported.
    public var canAppearLater: Bool {
        switch self {
        case .primary, .connector, .match: true
        case .crtc, .display: false
        }
    }

    /// The u8 `kind` field on the wire.
    public var kind: UInt8 {
        switch self {
        case .primary: 0
        case .crtc: 1
        case .connector: 2
        case .display: 3
        case .match: 4
        }
    }
}

public struct SubscribeFlags: OptionSet, Sendable, Hashable {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }
    /// Create the subscription paused: no ticks until RESUME.
    public static let startPaused = SubscribeFlags(rawValue: 1 << 0)
    /// While the display is off (or refuses vblank events), keep ticking at the last mode's rate
    /// from the model's prediction, flagged `.predicted`. Protocol 2.
    public static let predictWhileOff = SubscribeFlags(rawValue: 1 << 1)
    /// No TICK: the subscription only keeps its display's vblank events on, so the timing
    /// page's record of it stays current, for a client that paces itself from the page.
    /// Protocol 5; reserved and ignored before.
    public static let pageOnly = SubscribeFlags(rawValue: 1 << 2)
    /// Every tick from a real vblank: the subscription keeps the display's vblank interrupt
    /// on, as in continuous sampling, for a client that measures the display itself.
    /// Protocol 6; reserved and ignored before.
    public static let hardwareTicks = SubscribeFlags(rawValue: 1 << 3)
}

/// SUBSCRIBE: ticks from one display at a rate chosen from `range`.
public struct Subscribe: Sendable, Equatable {
    /// SUBSCRIBE with a selector of kind 4 (`.match`, protocol 3): the 80 bytes plus the text.
    public static let matchWireSize = 80 + DisplaySelector.maxTextSize
    /// Chosen by the client, unique among its live subscriptions, never 0.
    public var subscriptionID: UInt32
    public var selector: DisplaySelector
    public var range: FrameRateRange
    public var flags: SubscribeFlags
    /// Wake the client this long before each target vblank (ns); 0 wakes it just after each
    /// vblank, as in protocol 1. At most `WorkDuration.maximumNs`. Protocol 2.
    public var workDurationNs: UInt64
    public init(
        subscriptionID: UInt32, selector: DisplaySelector, range: FrameRateRange, flags: SubscribeFlags = [], workDurationNs: UInt64 = 0
    ) {
        self.subscriptionID = subscriptionID
        self.selector = selector
        self.range = range
        self.flags = flags
        self.workDurationNs = workDurationNs
    }
}

/// SET_WORK_DURATION: change a subscription's work duration. Protocol 2.
public struct SetWorkDuration: Sendable, Equatable {
    public var subscriptionID: UInt32
    public var workDurationNs: UInt64
    public init(subscriptionID: UInt32, workDurationNs: UInt64) {
        self.subscriptionID = subscriptionID
        self.workDurationNs = workDurationNs
    }
}

public enum WorkDuration {
    /// One second: a longer lead is a misunderstanding, not a frame budget.
    public static let maximumNs: UInt64 = 1_000_000_000
}

/// SET_RATE: change a subscription's frame-rate range.
public struct SetRate: Sendable, Equatable {
    public var subscriptionID: UInt32
    public var range: FrameRateRange
    public init(subscriptionID: UInt32, range: FrameRateRange) {
        self.subscriptionID = subscriptionID
        self.range = range
    }
}

public enum DisplayState: UInt8, Sendable, CaseIterable {
    case off = 0
    case on = 1
}

public struct DisplayFlags: OptionSet, Sendable, Hashable {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }
    /// Timestamps come from the kernel's vblank clock.
    public static let hardwareClock = DisplayFlags(rawValue: 1 << 0)
    /// The timer source: no display behind it.
    public static let synthetic = DisplayFlags(rawValue: 1 << 1)
    /// What `DisplaySelector.primary` picks.
    public static let primary = DisplayFlags(rawValue: 1 << 2)
    /// The timestamps' spread says they are the interrupt's time, not scanout's (TimingQuality).
    /// Protocol 4: older connections never see it.
    public static let interruptTimestamps = DisplayFlags(rawValue: 1 << 3)
    /// Variable refresh (VRR) is on: vblanks come anywhere between `minIntervalNs` and
    /// `maxIntervalNs` apart, so there is no grid. Protocol 5.
    public static let variable = DisplayFlags(rawValue: 1 << 4)
    /// The connector says the monitor can do variable refresh (`vrr_capable`). Protocol 5.
    public static let variableCapable = DisplayFlags(rawValue: 1 << 5)
    /// Sparse vblank sampling has the display's vblank interrupt asleep: ticks are model-timed
    /// until the next burst (docs/PROTOCOL.md § 7). Protocol 6.
    public static let modelTimed = DisplayFlags(rawValue: 1 << 6)
    /// The bits a later protocol version gave meaning to: a connection at `version` never sees
    /// them. Other bits pass as they are (a reader ignores the bits it does not know, § 8), so a
    /// record decoded and written again at the same version keeps every bit it had.
    public static func definedAfter(version: UInt16) -> DisplayFlags {
        DisplayFlags(rawValue: version >= 6 ? 0 : version >= 5 ? 0x40 : version >= 4 ? 0x70 : 0x78)
    }
}

/// One display (a CRTC driving a connector): a fixed 96-byte record on the wire, 224 bytes
/// from protocol 3 (the card's bus path and the EDID identity appended), 240 from protocol 4
/// (the timing residuals appended; the generation in the reserved u32 at 20), 272 from
/// protocol 5 (the variable refresh intervals and a clock pair appended).
public struct DisplayInfo: Sendable, Equatable {
    public static let wireSize = 96
    public static let version3WireSize = 224
    public static let version4WireSize = 240
    public static let version5WireSize = 272
    /// The record size a connection at `version` gets.
    public static func wireSize(version: UInt16) -> Int {
        version >= 5 ? version5WireSize : version >= 4 ? version4WireSize : version >= 3 ? version3WireSize : wireSize
    }
    public var displayID: UInt32
    public var crtcID: UInt32
    public var connectorID: UInt32
    public var state: DisplayState
    public var flags: DisplayFlags
    /// Exact refresh in mHz (from the mode's pixel clock, never the rounded vrefresh).
    public var refreshMillihertz: UInt64
    public var periodNs: UInt64
    public var width: UInt16
    public var height: UInt16
    /// "Virtual-1", or "timer" for the timer source. At most 32 bytes of UTF-8.
    public var connectorName: String
    /// "card0"; at most 16 bytes of UTF-8.
    public var deviceName: String
    /// The card's stable path, as udev names it in /dev/dri/by-path without "-card"
    /// ("pci-0000:03:00.0", "platform-vkms"); "" when unknown. Protocol 3, at most 64 bytes.
    public var busPath: String
    /// The monitor's EDID make ("Dell Inc.", or "PNP(XXX)"), model and serial, as
    /// libdisplay-info derives them (EDIDIdentity); "" without an EDID. Protocol 3.
    public var edidMake: String
    public var edidModel: String
    public var edidSerial: String
    /// The display's configuration generation (Display.generation): bumps once for each change
    /// of mode, on/off or model reset. Protocol 4; 0 from older daemons.
    public var generation: UInt32
    /// The refresh model's residuals over its window (TimingQuality). Protocol 4; zero (and
    /// `timing.samples` 0: not measured) from older daemons.
    public var timing: DisplayTiming
    /// The variable refresh range as intervals, ns: the shortest (1 / the EDID range's maximum
    /// rate; the mode's period when the EDID has no range) and the longest (1 / its minimum
    /// rate; 0 when unknown). Set while the monitor is `variableCapable`, 0 otherwise.
    /// VK_EXT_present_timing's `refreshDuration` is the shortest. Protocol 5.
    public var minIntervalNs: UInt64
    public var maxIntervalNs: UInt64
    /// (CLOCK_MONOTONIC, CLOCK_REALTIME) read together when the daemon built a DISPLAY_EVENT's
    /// record; nil in DISPLAY_LIST and SUBSCRIBED records and from older daemons. Protocol 5.
    public var clock: ClockPair?
    public init(
        displayID: UInt32, crtcID: UInt32, connectorID: UInt32, state: DisplayState, flags: DisplayFlags,
        refreshMillihertz: UInt64, periodNs: UInt64, width: UInt16, height: UInt16,
        connectorName: String, deviceName: String,
        busPath: String = "", edidMake: String = "", edidModel: String = "", edidSerial: String = "",
        generation: UInt32 = 0, timing: DisplayTiming = DisplayTiming(),
        minIntervalNs: UInt64 = 0, maxIntervalNs: UInt64 = 0, clock: ClockPair? = nil
    ) {
        self.generation = generation
        self.timing = timing
        self.minIntervalNs = minIntervalNs
        self.maxIntervalNs = maxIntervalNs
        self.clock = clock
        self.busPath = busPath
        self.edidMake = edidMake
        self.edidModel = edidModel
        self.edidSerial = edidSerial
        self.displayID = displayID
        self.crtcID = crtcID
        self.connectorID = connectorID
        self.state = state
        self.flags = flags
        self.refreshMillihertz = refreshMillihertz
        self.periodNs = periodNs
        self.width = width
        self.height = height
        self.connectorName = connectorName
        self.deviceName = deviceName
    }
}

/// SUBSCRIBED: the answer to SUBSCRIBE (and to SET_RATE), with the divisor chosen. Display id 0
/// (protocol 2): the display is not there yet; another SUBSCRIBED follows when it appears.
public struct Subscribed: Sendable, Equatable {
    public var isWaiting: Bool { displayID == 0 }
    public var subscriptionID: UInt32
    public var displayID: UInt32
    public var divisor: UInt32
    public var displayIntervalNs: UInt64
    public var clientIntervalNs: UInt64
    public var display: DisplayInfo
    public init(
        subscriptionID: UInt32, displayID: UInt32, divisor: UInt32, displayIntervalNs: UInt64, clientIntervalNs: UInt64,
        display: DisplayInfo
    ) {
        self.subscriptionID = subscriptionID
        self.displayID = displayID
        self.divisor = divisor
        self.displayIntervalNs = displayIntervalNs
        self.clientIntervalNs = clientIntervalNs
        self.display = display
    }
}

public enum DisplayEventKind: UInt16, Sendable, CaseIterable {
    case modeChanged = 1
    case off = 2
    case on = 3
    case added = 4
    case removed = 5
    /// Variable refresh turned on or off (the record's `variable` flag says which). Protocol 5:
    /// older connections are not sent it (their readers would refuse the kind).
    case variableRefreshChanged = 6

    /// The first protocol version that may be sent this kind.
    public var minimumVersion: UInt16 {
        self == .variableRefreshChanged ? WireProtocol.variableRefreshSinceVersion : WireProtocol.minimumVersion
    }

    /// What a connection must be able to do to be sent this kind.
    public var requiredFeatures: ProtocolFeatures { self == .variableRefreshChanged ? .variableRefresh : [] }
}

/// DISPLAY_EVENT: sent to every client subscribed to the display (added: to every client).
public struct DisplayEvent: Sendable, Equatable {
    public var kind: DisplayEventKind
    public var display: DisplayInfo
    public init(kind: DisplayEventKind, display: DisplayInfo) {
        self.kind = kind
        self.display = display
    }
}

public enum ErrorCode: UInt16, Sendable, CaseIterable {
    case malformed = 1
    case unknownType = 2
    case notHandshaken = 3
    case unknownDisplay = 4
    case unknownSubscription = 5
    case duplicateSubscription = 6
    case tooManySubscriptions = 7
    case displayOff = 8
    case internalError = 9
}

/// ERROR: a request failed. Codes 1–3 are followed by a disconnect; the others are not.
public struct ErrorMessage: Sendable, Equatable {
    public var code: ErrorCode
    /// The subscription the failed request named, 0 if none.
    public var subscriptionID: UInt32
    public var message: String
    public init(code: ErrorCode, subscriptionID: UInt32 = 0, message: String) {
        self.code = code
        self.subscriptionID = subscriptionID
        self.message = message
    }
}
