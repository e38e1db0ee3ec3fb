// TICK's body: a vblank and what a client plans by it. Its bytes are in Tick+Wire.swift
// and docs/PROTOCOL.md.

public struct TickFlags: OptionSet, Sendable, Hashable {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }
    /// `timestampNs` is the kernel's vblank timestamp.
    public static let hardwareTimestamp = TickFlags(rawValue: 1)
    /// `timestampNs` is the model's prediction (display off, `.predictWhileOff`).
    public static let predicted = TickFlags(rawValue: 2)
    /// From the timer source.
    public static let synthetic = TickFlags(rawValue: 4)
    /// Variable refresh is on (protocol 5): no grid, so `targetTimestampNs` and the timelines
    /// are the earliest each vblank can come (the last vblank + k × the shortest interval) and
    /// `displayIntervalNs` is the shortest interval.
    public static let variable = TickFlags(rawValue: 8)
    /// Protocol 6: the display is on and followed, but its vblank interrupt sleeps between
    /// bursts (sparse sampling, docs/PROTOCOL.md § 7): `timestampNs` is the model's
    /// prediction of that vblank, `sequence` the count the kernel gives it. Versions 1 to 5
    /// get `.predicted` instead.
    public static let modelTimed = TickFlags(rawValue: 16)
}

/// One upcoming presentation candidate: a vblank at the subscription's rate and its predicted time.
public struct FrameTimeline: Sendable, Equatable, Hashable {
    public var sequence: UInt64
    public var presentationNs: UInt64
    public init(sequence: UInt64, presentationNs: UInt64) {
        self.sequence = sequence
        self.presentationNs = presentationNs
    }
}

/// Up to four frame timelines, stored inline so that a tick allocates nothing.
public struct FrameTimelines: Sendable, Equatable, RandomAccessCollection {
    public static let capacity = 4
    private var t0 = FrameTimeline(sequence: 0, presentationNs: 0)
    private var t1 = FrameTimeline(sequence: 0, presentationNs: 0)
    private var t2 = FrameTimeline(sequence: 0, presentationNs: 0)
    private var t3 = FrameTimeline(sequence: 0, presentationNs: 0)
    public private(set) var count = 0

    public init() {}

    public init(_ timelines: [FrameTimeline]) {
        for t in timelines { append(t) }
    }

    /// Just `timeline`, without the array `init(_:)` would allocate: a tick's default.
    public init(one timeline: FrameTimeline) {
        append(timeline)
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int { count }

    public subscript(i: Int) -> FrameTimeline {
        precondition(i >= 0 && i < count, "frame timeline index out of range")
        switch i {
        case 0: return t0
        case 1: return t1
        case 2: return t2
        default: return t3
        }
    }

    /// Adds one; beyond `capacity` it is dropped.
    public mutating func append(_ t: FrameTimeline) {
        switch count {
        case 0: t0 = t
        case 1: t1 = t
        case 2: t2 = t
        case 3: t3 = t
        default: return
        }
        count += 1
    }
}

/// TICK: one frame for one subscription: 152 bytes (72 in protocol 1). The daemon's hot path.
public struct Tick: Sendable, Equatable {
    public static let wireSize = 152
    public static let version1WireSize = 72
    public var subscriptionID: UInt32
    public var displayID: UInt32
    /// The 64-bit sequence of the latest vblank (with a work duration 0: a multiple of `divisor`).
    public var sequence: UInt64
    /// CLOCK_MONOTONIC ns of that vblank (the kernel's timestamp, or the model's if `.predicted`).
    public var timestampNs: UInt64
    /// Predicted ns of vblank `targetSequence`, the one the frame being prepared is for.
    public var targetTimestampNs: UInt64
    /// The display's current frame interval (CADisplayLink.duration).
    public var displayIntervalNs: UInt64
    /// divisor × display interval.
    public var clientIntervalNs: UInt64
    /// Ticks for this subscription not delivered since the last one delivered.
    public var skipped: UInt32
    public var divisor: UInt32
    public var flags: TickFlags
    /// The target vblank: `sequence + divisor` with work duration 0, else the vblank the wake
    /// was scheduled for (a multiple of `divisor`). Protocol 2; derived when absent.
    public var targetSequence: UInt64
    /// The target and the vblanks after it at this rate, with their predicted times. Protocol 2;
    /// one (the target) when absent.
    public var timelines: FrameTimelines
    /// The display's configuration generation when the tick was made (DisplayInfo.generation).
    /// Protocol 4; 0 from older daemons.
    public var generation: UInt32
    public init(
        subscriptionID: UInt32, displayID: UInt32, sequence: UInt64, timestampNs: UInt64, targetTimestampNs: UInt64,
        displayIntervalNs: UInt64, clientIntervalNs: UInt64, skipped: UInt32, divisor: UInt32, flags: TickFlags,
        targetSequence: UInt64? = nil, timelines: FrameTimelines? = nil, generation: UInt32 = 0
    ) {
        self.generation = generation
        self.subscriptionID = subscriptionID
        self.displayID = displayID
        self.sequence = sequence
        self.timestampNs = timestampNs
        self.targetTimestampNs = targetTimestampNs
        self.displayIntervalNs = displayIntervalNs
        self.clientIntervalNs = clientIntervalNs
        self.skipped = skipped
        self.divisor = divisor
        self.flags = flags
        let target = targetSequence ?? sequence &+ UInt64(divisor)
        self.targetSequence = target
        self.timelines = timelines ?? FrameTimelines(one: FrameTimeline(sequence: target, presentationNs: targetTimestampNs))
    }
}
