/// One display's timing as the timing page holds it (protocol 5): the last vblank the daemon
/// received and the refresh model's line, read by a client without a syscall. Pure: the
/// clients' cores fill it from the page's record and ask it where the next vblank is.
public struct VBlankTiming: Sendable, Equatable {
    public var displayID: UInt32
    /// The display's configuration generation (the one TICK and display records carry).
    public var generation: UInt32
    /// The display record's flags in the low 16 bits, the page's own (`VBlankTiming.on`,
    /// `.current`) above.
    public var flags: UInt32
    public var lastSequence: UInt64
    public var lastTimestampNs: UInt64
    /// The model's line: vblank `anchorSequence` is at `anchorNs`, one `periodNs` apart.
    public var anchorSequence: UInt64
    public var anchorNs: UInt64
    /// The model's period: whole ns plus `periodFraction` / 2³² ns, so a prediction minutes
    /// ahead is not off by the rounding times the frames between.
    public var periodWholeNs: UInt64
    public var periodFraction: UInt32
    public var refreshMillihertz: UInt64
    /// Variable refresh: the shortest and longest frame intervals (0 on a fixed grid).
    public var minimumIntervalNs: UInt64
    public var maximumIntervalNs: UInt64
    /// CLOCK_MONOTONIC when the daemon wrote the record.
    public var updatedNs: UInt64

    public static let on: UInt32 = 0x1_0000
    public static let current: UInt32 = 0x2_0000

    public init(
        displayID: UInt32, generation: UInt32, flags: UInt32, lastSequence: UInt64, lastTimestampNs: UInt64,
        anchorSequence: UInt64, anchorNs: UInt64, periodWholeNs: UInt64, periodFraction: UInt32,
        refreshMillihertz: UInt64, minimumIntervalNs: UInt64 = 0, maximumIntervalNs: UInt64 = 0, updatedNs: UInt64
    ) {
        self.displayID = displayID
        self.generation = generation
        self.flags = flags
        self.lastSequence = lastSequence
        self.lastTimestampNs = lastTimestampNs
        self.anchorSequence = anchorSequence
        self.anchorNs = anchorNs
        self.periodWholeNs = periodWholeNs
        self.periodFraction = periodFraction
        self.refreshMillihertz = refreshMillihertz
        self.minimumIntervalNs = minimumIntervalNs
        self.maximumIntervalNs = maximumIntervalNs
        self.updatedNs = updatedNs
    }

    public var isOn: Bool { flags & Self.on != 0 }
    /// Vblank events are on and one has come since: the last vblank is at most a frame (and a
    /// scheduling delay) old.
    public var isCurrent: Bool { flags & Self.current != 0 }

    /// The period in ns, with its fraction.
    public var periodNs: Double { Double(periodWholeNs) + Double(periodFraction) / 4_294_967_296 }

    /// Splits a period into the page's whole ns and 2⁻³² fraction.
    public static func split(periodNs: Double) -> (whole: UInt64, fraction: UInt32) {
        guard periodNs.isFinite, periodNs >= 1 else { return (0, 0) }
        // Conversions truncate (no floor(): libvsync links no libm).
        let whole = UInt64(periodNs)
        let fraction = (periodNs - Double(whole)) * 4_294_967_296
        return (whole, UInt32(min(fraction, 4_294_967_295)))
    }

    /// The model's time of vblank `sequence` (past or future).
    public func timestamp(ofSequence sequence: UInt64) -> UInt64 {
        let frames = sequence >= anchorSequence ? Double(sequence - anchorSequence) : -Double(anchorSequence - sequence)
        let offset = frames * periodNs
        if offset >= 0 { return anchorNs &+ UInt64(offset + 0.5) }
        let back = UInt64(-offset + 0.5)
        return back > anchorNs ? 0 : anchorNs - back
    }

    /// The first vblank the model puts strictly after `timeNs`: what a software vsync timer
    /// aims at. Nil without a period (the display has not been measured).
    public func nextVBlank(after timeNs: UInt64) -> (sequence: UInt64, timestampNs: UInt64)? {
        let period = periodNs
        guard period >= 1 else { return nil }
        // Frames from the anchor to `timeNs`, rounded down; then step to the first one after.
        let delta = timeNs >= anchorNs ? Double(timeNs - anchorNs) : -Double(anchorNs - timeNs)
        let frames = Int64(delta / period)  // toward zero; the steps below settle it
        var sequence = frames >= 0 ? anchorSequence &+ UInt64(frames) : anchorSequence &- UInt64(-frames)
        var time = timestamp(ofSequence: sequence)
        while time > timeNs, sequence > 0, timestamp(ofSequence: sequence &- 1) > timeNs {
            sequence &-= 1
            time = timestamp(ofSequence: sequence)
        }
        while time <= timeNs {
            sequence &+= 1
            time = timestamp(ofSequence: sequence)
        }
        return (sequence, time)
    }
}
