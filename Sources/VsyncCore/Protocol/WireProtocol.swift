/// Constants of the vsyncd wire protocol. The full specification is docs/PROTOCOL.md.
///
/// Transport: AF_UNIX SOCK_SEQPACKET, one message per datagram, little-endian fixed-width fields.
public enum WireProtocol {
    /// "VSYN" read as a little-endian u32: the first body field of HELLO, so a stray
    /// connection from something that is not a vsyncd client is refused at once.
    public static let magic: UInt32 = 0x4E59_5356
    /// 2 added work durations, SET_WORK_DURATION, frame timelines in TICK and predicted ticks
    /// while a display is off; 3 the card's bus path and EDID identity in display records,
    /// selectors naming a card or a monitor, following `primary` and waiting through a display's
    /// removal; 4 configuration generations in ticks and display records, and the timing
    /// residuals and interrupt-timestamp flag in display records; 5 the shared timing page
    /// (TIMING_PAGE), variable refresh (VRR) in ticks, records and a display event kind, and a
    /// (CLOCK_MONOTONIC, CLOCK_REALTIME) pair in records (docs/PROTOCOL.md § 8 lists what each
    /// version added).
    public static let currentVersion: UInt16 = 6
    public static let minimumVersion: UInt16 = 1
    public static let maxMessageSize = 4096
    public static let headerSize = 8
    /// Fixed-width string fields (connector names, client names).
    public static let nameSize = 32
    /// The card name field of a display record ("card0").
    public static let deviceNameSize = 16
    /// Error and refusal text: the rest of the message, at most this many bytes of UTF-8.
    public static let maxTextSize = 256
}

// The version that brought each feature, named as libwayland's scanner names its
// `*_SINCE_VERSION` gates: the daemon and the client cores read these, not numbers.
extension WireProtocol {
    /// SET_WORK_DURATION, a work duration and predicted ticks in SUBSCRIBE, frame timelines in TICK.
    public static let workDurationsSinceVersion: UInt16 = 2
    /// A SUBSCRIBE for a display not there yet waits for it (SUBSCRIBED with display id 0).
    public static let waitingSubscriptionsSinceVersion: UInt16 = 2
    /// Selectors naming a card or a monitor (kind 4, `HDMI-A-1@card1`), the card's bus path
    /// and the EDID identity in display records.
    public static let cardSelectorsSinceVersion: UInt16 = 3
    /// Subscriptions following `primary` move with it.
    public static let followingPrimarySinceVersion: UInt16 = 3
    /// A named subscription whose display is removed waits for it to come back.
    public static let waitingThroughRemovalSinceVersion: UInt16 = 3
    /// Configuration generations in ticks and records; timing residuals in records.
    public static let generationsSinceVersion: UInt16 = 4
    /// TIMING_PAGE after WELCOME, and page-only subscriptions.
    public static let timingPageSinceVersion: UInt16 = 5
    /// Variable refresh in ticks and records and the `variableRefreshChanged` event; the clock
    /// pair in records.
    public static let variableRefreshSinceVersion: UInt16 = 5
    /// Model-timed ticks between bursts of sparse vblank sampling (TICK flag `modelTimed`),
    /// subscriptions that ask for hardware ticks, and the largest phase correction in records.
    public static let modelTimedTicksSinceVersion: UInt16 = 6
}

/// What a connection can do, decided once from the version agreed at HELLO and then read by
/// name (`features.contains(.workDurations)`), never by comparing version numbers.
public struct ProtocolFeatures: OptionSet, Sendable {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    public static let workDurations = ProtocolFeatures(rawValue: 1 << 0)
    public static let waitingSubscriptions = ProtocolFeatures(rawValue: 1 << 1)
    public static let cardSelectors = ProtocolFeatures(rawValue: 1 << 2)
    public static let followingPrimary = ProtocolFeatures(rawValue: 1 << 3)
    public static let waitingThroughRemoval = ProtocolFeatures(rawValue: 1 << 4)
    public static let generations = ProtocolFeatures(rawValue: 1 << 5)
    public static let timingPage = ProtocolFeatures(rawValue: 1 << 6)
    public static let variableRefresh = ProtocolFeatures(rawValue: 1 << 7)
    public static let modelTimedTicks = ProtocolFeatures(rawValue: 1 << 8)

    /// Each feature and the version that brought it (the `*SinceVersion` constants).
    public static let sinceVersion: [(feature: ProtocolFeatures, version: UInt16)] = [
        (.workDurations, WireProtocol.workDurationsSinceVersion),
        (.waitingSubscriptions, WireProtocol.waitingSubscriptionsSinceVersion),
        (.cardSelectors, WireProtocol.cardSelectorsSinceVersion),
        (.followingPrimary, WireProtocol.followingPrimarySinceVersion),
        (.waitingThroughRemoval, WireProtocol.waitingThroughRemovalSinceVersion),
        (.generations, WireProtocol.generationsSinceVersion),
        (.timingPage, WireProtocol.timingPageSinceVersion),
        (.variableRefresh, WireProtocol.variableRefreshSinceVersion),
        (.modelTimedTicks, WireProtocol.modelTimedTicksSinceVersion),
    ]

    /// Everything a connection at `version` can do.
    public init(version: UInt16) {
        var features: ProtocolFeatures = []
        for (feature, since) in Self.sinceVersion where version >= since { features.insert(feature) }
        self = features
    }
}

/// Message types. Client → server types are below 0x100, server → client types at or above it.
public enum MessageType: UInt16, Sendable, CaseIterable {
    case hello = 0x01
    case listDisplays = 0x02
    case subscribe = 0x03
    case setRate = 0x04
    case pause = 0x05
    case resume = 0x06
    case unsubscribe = 0x07
    case setWorkDuration = 0x08
    case welcome = 0x101
    case refused = 0x102
    case displayList = 0x103
    case subscribed = 0x104
    case tick = 0x105
    case displayEvent = 0x106
    case error = 0x107
    case timingPage = 0x108

    /// Size of the message as this version writes it. Messages may be longer (fields appended
    /// by later versions); for REFUSED, ERROR and DISPLAY_LIST this is the fixed part before the
    /// text or the records.
    public var knownSize: Int {
        switch self {
        case .subscribe: 80
        case .tick: Tick.wireSize
        default: minimumSize
        }
    }

    /// The least a reader accepts: the size in the version that introduced the type. Fields
    /// appended since are read as their defaults when absent (work duration 0, one timeline).
    public var minimumSize: Int {
        switch self {
        case .hello: 48
        case .listDisplays: 8
        case .subscribe: 68
        case .setRate: 24
        case .pause, .resume, .unsubscribe: 12
        case .setWorkDuration: 24
        case .welcome: 20
        case .refused: 12
        case .displayList: 16
        case .subscribed: 136
        case .tick: Tick.version1WireSize
        case .displayEvent: 112
        case .error: 16
        case .timingPage: 16
        }
    }

    public var isClientRequest: Bool { rawValue < 0x100 }
}

/// Why a datagram could not be decoded. Each case describes itself in one line.
public enum WireError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Shorter than the size this version knows for the type (or than the header).
    case truncated(type: UInt16, size: Int, minimum: Int)
    /// Longer than `WireProtocol.maxMessageSize`.
    case oversized(Int)
    case unknownType(UInt16)
    /// The header's size field disagrees with the datagram's length.
    case sizeMismatch(header: Int, actual: Int)
    /// A field holds a value this version does not allow (bad magic, bad UTF-8, NaN rate, …).
    case invalidField(String)
    /// A SUBSCRIBE that keeps every rule of the wire but whose selector is outside the
    /// selector grammar (`DisplaySelector.parse`). Not malformed: the daemon refuses the
    /// subscription (ERROR unknownDisplay) and keeps the connection.
    case badSelector(subscriptionID: UInt32, message: String)

    public var description: String {
        switch self {
        case .truncated(let type, let size, let minimum):
            "message type 0x\(String(type, radix: 16)) is \(size) bytes, shorter than its minimum of \(minimum)"
        case .oversized(let size):
            "message of \(size) bytes exceeds the maximum of \(WireProtocol.maxMessageSize)"
        case .unknownType(let type):
            "unknown message type 0x\(String(type, radix: 16))"
        case .sizeMismatch(let header, let actual):
            "header says \(header) bytes but the datagram has \(actual)"
        case .invalidField(let what):
            "invalid field: \(what)"
        case .badSelector(_, let message):
            "display selector: \(message)"
        }
    }
}
