#if !VSYNC_EMBEDDED
    import VsyncCore
#endif

/// One frame as the client hands it out: the newest tick of one subscription in a read, with
/// the ticks it replaced counted in `skipped`.
public struct ClientFrame: Sendable, Equatable {
    public var subscriptionID: UInt32
    public var displayID: UInt32
    /// The 64-bit sequence of the newest vblank (without a work duration: a multiple of `divisor`).
    public var sequence: UInt64
    /// When that vblank happened (CLOCK_MONOTONIC ns).
    public var timestampNs: UInt64
    /// The predicted time of vblank `targetSequence`, the one this frame is for: the deadline.
    public var targetTimestampNs: UInt64
    /// The vblank the frame is for: `sequence + divisor`, or with a work duration the vblank the
    /// wake-up was aimed at.
    public var targetSequence: UInt64
    /// The target and up to three later vblanks at the subscription's rate, with predicted
    /// times: an app that needs longer aims at a later one.
    public var timelines: FrameTimelines
    /// The display's frame interval.
    public var displayIntervalNs: UInt64
    /// `divisor × displayIntervalNs`.
    public var clientIntervalNs: UInt64
    /// Due ticks not delivered since the last delivered one: the daemon's count (a full
    /// socket) plus the ticks this library dropped for a newer one in the same read.
    public var skipped: UInt32
    public var divisor: UInt32
    public var flags: TickFlags
    /// When this library read the tick (CLOCK_MONOTONIC ns).
    public var receivedNs: UInt64
    /// The display's configuration generation (protocol 4; 0 from older daemons): it differs
    /// from the last frame's after any change of mode, on/off or model reset.
    public var generation: UInt32

    public init(_ tick: Tick, replaced: UInt32, receivedNs: UInt64) {
        subscriptionID = tick.subscriptionID
        displayID = tick.displayID
        sequence = tick.sequence
        timestampNs = tick.timestampNs
        targetTimestampNs = tick.targetTimestampNs
        targetSequence = tick.targetSequence
        timelines = tick.timelines
        displayIntervalNs = tick.displayIntervalNs
        clientIntervalNs = tick.clientIntervalNs
        let total = UInt64(tick.skipped) + UInt64(replaced)
        skipped = total > UInt64(UInt32.max) ? UInt32.max : UInt32(total)
        divisor = tick.divisor
        flags = tick.flags
        generation = tick.generation
        self.receivedNs = receivedNs
    }
}

/// What a `dispatch` produced, in order, for the caller to hand to its callbacks.
public enum ClientEvent: Sendable, Equatable {
    /// The handshake finished (also after every reconnect; subscriptions are renewed).
    case connected(Welcome)
    /// The daemon confirmed a subscription or its new rate (also after a mode change).
    case subscribed(Subscribed)
    /// The subscription's display changed mode, turned off or on. `added` has subscription 0.
    case display(subscriptionID: UInt32, DisplayEvent)
    /// The newest tick of one subscription in this read.
    case frame(ClientFrame)
    /// Something failed for this subscription (0: there is none; the client's own error).
    case error(subscriptionID: UInt32, ClientError)
}

/// A subscription as the client last heard of it.
public struct SubscriptionInfo: Sendable, Equatable {
    public var selector: DisplaySelector
    public var range: FrameRateRange
    public var flags: SubscribeFlags
    public var paused: Bool
    /// False after the daemon said the display is unknown or gone, until a display is added.
    public var active: Bool
    /// The display record from the last SUBSCRIBED or display event; nil before the first.
    public var display: DisplayInfo?
    /// The divisor and display interval from the last SUBSCRIBED, mode change or tick; 0 before.
    public var divisor: UInt32
    public var displayIntervalNs: UInt64
    /// How long before each target vblank the daemon wakes this subscription (0: after each vblank).
    public var workDurationNs: UInt64 = 0
    /// The daemon said the display is not there yet (SUBSCRIBED with display 0); it answers
    /// again when the display appears.
    public var isWaiting: Bool { display?.displayID == 0 }
}
