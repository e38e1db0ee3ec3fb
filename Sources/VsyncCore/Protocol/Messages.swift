// The messages' bodies. Byte layouts are in docs/PROTOCOL.md and in the codec
// (ClientMessage.swift, ServerMessage.swift, DisplayInfo+Wire.swift).

/// HELLO: the client's first message, offering a range of protocol versions.
public struct Hello: Sendable, Equatable {
    public var minVersion: UInt16
    public var maxVersion: UInt16
    /// For the daemon's log; at most 32 bytes of UTF-8 on the wire.
    public var clientName: String
    public init(minVersion: UInt16, maxVersion: UInt16, clientName: String) {
        self.minVersion = minVersion; self.maxVersion = maxVersion; self.clientName = clientName
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
        self.version = version; self.serverFlags = serverFlags; self.serverPID = serverPID
    }
}

public enum RefusalCode: UInt16, Sendable, CaseIterable {
    case versionUnsupported = 1, tooManyClients = 2, badHandshake = 3
}

/// REFUSED: the handshake failed; the server closes the connection after sending it.
public struct Refusal: Sendable, Equatable {
    public var code: RefusalCode
    public var message: String
    public init(code: RefusalCode, message: String) { self.code = code; self.message = message }
}

/// Which display a subscription wants.
public enum DisplaySelector: Sendable, Equatable, Hashable {
    /// The first active display (lowest display id flagged `.primary`).
    case primary
    case crtc(UInt32)
    /// A connector name such as "Virtual-1", "HDMI-A-1", or "timer".
    case connector(String)
    /// A display id from DISPLAY_LIST.
    case display(UInt32)

    /// The u8 `kind` field on the wire.
    public var kind: UInt8 {
        switch self {
        case .primary: 0
        case .crtc: 1
        case .connector: 2
        case .display: 3
        }
    }
}

public struct SubscribeFlags: OptionSet, Sendable, Hashable {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }
    /// Create the subscription paused: no ticks until RESUME.
    public static let startPaused = SubscribeFlags(rawValue: 1 << 0)
    /// While the display is off, keep ticking from the model's prediction (flagged `.predicted`).
    public static let syntheticWhileOff = SubscribeFlags(rawValue: 1 << 1)
}

/// SUBSCRIBE: ticks from one display at a rate chosen from `range`.
public struct Subscribe: Sendable, Equatable {
    /// Chosen by the client, unique among its live subscriptions, never 0.
    public var subscriptionID: UInt32
    public var selector: DisplaySelector
    public var range: FrameRateRange
    public var flags: SubscribeFlags
    public init(subscriptionID: UInt32, selector: DisplaySelector, range: FrameRateRange, flags: SubscribeFlags = []) {
        self.subscriptionID = subscriptionID; self.selector = selector; self.range = range; self.flags = flags
    }
}

/// SET_RATE: change a subscription's frame-rate range.
public struct SetRate: Sendable, Equatable {
    public var subscriptionID: UInt32
    public var range: FrameRateRange
    public init(subscriptionID: UInt32, range: FrameRateRange) {
        self.subscriptionID = subscriptionID; self.range = range
    }
}

public enum DisplayState: UInt8, Sendable, CaseIterable {
    case off = 0, on = 1
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
}

/// One display (a CRTC driving a connector): a fixed 96-byte record on the wire.
public struct DisplayInfo: Sendable, Equatable {
    public static let wireSize = 96
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
    public init(
        displayID: UInt32, crtcID: UInt32, connectorID: UInt32, state: DisplayState, flags: DisplayFlags,
        refreshMillihertz: UInt64, periodNs: UInt64, width: UInt16, height: UInt16,
        connectorName: String, deviceName: String
    ) {
        self.displayID = displayID; self.crtcID = crtcID; self.connectorID = connectorID
        self.state = state; self.flags = flags
        self.refreshMillihertz = refreshMillihertz; self.periodNs = periodNs
        self.width = width; self.height = height
        self.connectorName = connectorName; self.deviceName = deviceName
    }
}

/// SUBSCRIBED: the answer to SUBSCRIBE (and to SET_RATE), with the divisor chosen.
public struct Subscribed: Sendable, Equatable {
    public var subscriptionID: UInt32
    public var displayID: UInt32
    public var divisor: UInt32
    public var displayIntervalNs: UInt64
    public var clientIntervalNs: UInt64
    public var display: DisplayInfo
    public init(subscriptionID: UInt32, displayID: UInt32, divisor: UInt32, displayIntervalNs: UInt64, clientIntervalNs: UInt64, display: DisplayInfo) {
        self.subscriptionID = subscriptionID; self.displayID = displayID; self.divisor = divisor
        self.displayIntervalNs = displayIntervalNs; self.clientIntervalNs = clientIntervalNs; self.display = display
    }
}

public struct TickFlags: OptionSet, Sendable, Hashable {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }
    /// `timestampNs` is the kernel's vblank timestamp.
    public static let hardwareTimestamp = TickFlags(rawValue: 1)
    /// `timestampNs` is the model's prediction (display off, `.syntheticWhileOff`).
    public static let predicted = TickFlags(rawValue: 2)
    /// From the timer source.
    public static let synthetic = TickFlags(rawValue: 4)
}

/// TICK: one frame for one subscription. Fixed 72 bytes; the daemon's hot path.
public struct Tick: Sendable, Equatable {
    public static let wireSize = 72
    public var subscriptionID: UInt32
    public var displayID: UInt32
    /// The 64-bit vblank sequence; a multiple of `divisor`.
    public var sequence: UInt64
    /// CLOCK_MONOTONIC ns of the vblank this tick belongs to (the kernel's timestamp).
    public var timestampNs: UInt64
    /// Predicted ns of the next vblank at this client's rate (sequence + divisor).
    public var targetTimestampNs: UInt64
    /// The display's current frame interval (CADisplayLink.duration).
    public var displayIntervalNs: UInt64
    /// divisor × display interval.
    public var clientIntervalNs: UInt64
    /// Ticks for this subscription not delivered since the last one delivered.
    public var skipped: UInt32
    public var divisor: UInt32
    public var flags: TickFlags
    public init(
        subscriptionID: UInt32, displayID: UInt32, sequence: UInt64, timestampNs: UInt64, targetTimestampNs: UInt64,
        displayIntervalNs: UInt64, clientIntervalNs: UInt64, skipped: UInt32, divisor: UInt32, flags: TickFlags
    ) {
        self.subscriptionID = subscriptionID; self.displayID = displayID; self.sequence = sequence
        self.timestampNs = timestampNs; self.targetTimestampNs = targetTimestampNs
        self.displayIntervalNs = displayIntervalNs; self.clientIntervalNs = clientIntervalNs
        self.skipped = skipped; self.divisor = divisor; self.flags = flags
    }
}

public enum DisplayEventKind: UInt16, Sendable, CaseIterable {
    case modeChanged = 1, off = 2, on = 3, added = 4, removed = 5
}

/// DISPLAY_EVENT: sent to every client subscribed to the display (added: to every client).
public struct DisplayEvent: Sendable, Equatable {
    public var kind: DisplayEventKind
    public var display: DisplayInfo
    public init(kind: DisplayEventKind, display: DisplayInfo) { self.kind = kind; self.display = display }
}

public enum ErrorCode: UInt16, Sendable, CaseIterable {
    case malformed = 1, unknownType = 2, notHandshaken = 3, unknownDisplay = 4, unknownSubscription = 5
    case duplicateSubscription = 6, tooManySubscriptions = 7, displayOff = 8, internalError = 9
}

/// ERROR: a request failed. Codes 1–3 are followed by a disconnect; the others are not.
public struct ErrorMessage: Sendable, Equatable {
    public var code: ErrorCode
    /// The subscription the failed request named, 0 if none.
    public var subscriptionID: UInt32
    public var message: String
    public init(code: ErrorCode, subscriptionID: UInt32 = 0, message: String) {
        self.code = code; self.subscriptionID = subscriptionID; self.message = message
    }
}
