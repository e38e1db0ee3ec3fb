/// One tick as an app handled it: what the tick carries, and when the app's work for it began
/// and ended (CLOCK_MONOTONIC ns).
public struct FrameTick: Sendable, Equatable {
    /// The newest vblank and its time.
    public var sequence: UInt64
    public var timestampNs: UInt64
    /// The vblank the frame is for and its predicted time.
    public var targetSequence: UInt64
    public var targetTimestampNs: UInt64
    /// The display's refresh period.
    public var periodNs: UInt64
    /// Display vblanks per frame at the subscription's rate (1 at the display's rate).
    public var divisor: UInt64
    /// The subscription's work duration (0: woken at each vblank, not before a target).
    public var workDurationNs: UInt64
    public var flags: TickFlags
    /// The display's configuration generation (0: the daemon does not say).
    public var generation: UInt32
    /// When the app began the frame (its callback ran, or it read the tick).
    public var startNs: UInt64
    /// When the app's work for the frame ended.
    public var endNs: UInt64

    public init(
        sequence: UInt64, timestampNs: UInt64, targetSequence: UInt64, targetTimestampNs: UInt64, periodNs: UInt64,
        divisor: UInt64 = 1, workDurationNs: UInt64 = 0, flags: TickFlags = [], generation: UInt32 = 0,
        startNs: UInt64, endNs: UInt64
    ) {
        self.sequence = sequence
        self.timestampNs = timestampNs
        self.targetSequence = targetSequence
        self.targetTimestampNs = targetTimestampNs
        self.periodNs = periodNs
        self.divisor = max(divisor, 1)
        self.workDurationNs = workDurationNs
        self.flags = flags
        self.generation = generation
        self.startNs = startNs
        self.endNs = endNs
    }
}

/// Gives every frame of one subscription its reason, from the ticks alone (nothing the wire
/// does not already carry), tick after tick:
///
/// - A tick flagged predicted came while the display was off: `predictedWhileOff`. A tick whose
///   generation differs from the previous one's follows a mode change or model reset:
///   `modeChange`.
/// - The frame is the tick's own (due at its commit point, target − work duration, or without
///   a work duration at its vblank; presented at the first vblank at or after its work ended,
///   not before its target), unless the tick came after ticks the app was owed and not given
///   while its context was free: then the frame is the first one owed, due when that tick was,
///   so a tick held back (a stopped daemon, a starved reader) shows as `deliveryLate`.
/// - ``FrameJank/classify(_:thresholds:)`` judges the frame: work ending after the target is
///   `appDeadlineMissed` unless the tick reached the app more than the start threshold after
///   it was due (counted from when the context finished its previous frame) and the work
///   itself fit: `deliveryLate`.
/// - A frame on time whose tick's vblank came more than the present threshold away from what
///   the previous tick predicted for it is a `predictionError`.
public struct FrameJankTracker: Sendable {
    public let thresholds: FrameJankThresholds
    private var last: FrameTick?

    public init(thresholds: FrameJankThresholds = .frameTimeline) {
        self.thresholds = thresholds
    }

    /// Forgets the previous tick (after a reconnect or resubscription: its predictions no
    /// longer bind the next tick).
    public mutating func reset() { last = nil }

    /// The frame of `tick` and its verdict.
    public mutating func frame(_ tick: FrameTick) -> (facts: FrameFacts, jank: FrameJank) {
        let t = thresholds
        var predicted = tick.targetTimestampNs
        var due = FrameFacts.dueNs(targetNs: predicted, workDurationNs: tick.workDurationNs, vblankNs: tick.timestampNs)
        var display: FrameDisplayState = tick.flags.contains(.variable) ? .variable : .on
        var predictionOff = false
        if tick.flags.contains(.predicted) {
            display = .predictedWhileOff
        } else if let prev = last, prev.generation != tick.generation {
            display = .modeChanged
        } else if let prev = last {
            let owedTarget = prev.targetSequence &+ prev.divisor
            let owedPresent = prev.targetTimestampNs &+ prev.divisor &* prev.periodNs
            let owedDue = FrameFacts.dueNs(
                targetNs: owedPresent, workDurationNs: tick.workDurationNs, vblankNs: prev.targetTimestampNs)
            if tick.targetSequence > owedTarget, prev.endNs <= owedDue &+ t.startNs {
                predicted = owedPresent
                due = owedDue
            }
            // What the previous tick predicted for this tick's vblank, if that was a later vblank
            // on its grid at most a few frames on.
            if tick.sequence >= prev.targetSequence, tick.sequence - prev.targetSequence <= 4 * prev.divisor {
                let expected = prev.targetTimestampNs &+ (tick.sequence - prev.targetSequence) &* prev.periodNs
                let off = tick.timestampNs > expected ? tick.timestampNs - expected : expected - tick.timestampNs
                predictionOff = off > t.presentNs
            }
        }
        var present = FrameJank.presentVBlank(
            workEndedNs: tick.endNs, referenceSequence: tick.targetSequence, referenceNs: tick.targetTimestampNs,
            periodNs: tick.periodNs
        ).timestampNs
        // A frame is queued for its target: it is not shown before it however early it is ready.
        present = max(present, predicted)
        let facts = FrameFacts(
            predictedPresentNs: predicted, periodNs: tick.periodNs, dueNs: due, receivedNs: tick.startNs,
            workEndedNs: tick.endNs, presentNs: present, display: display, contextFreeNs: last?.endNs)
        var jank = FrameJank.classify(facts, thresholds: t)
        if jank.reason == .onTime, predictionOff { jank.reason = .predictionError }
        last = tick
        return (facts, jank)
    }
}
