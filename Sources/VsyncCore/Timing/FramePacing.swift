/// Wake scheduling for a subscription with a work duration W (docs/PROTOCOL.md § 7):
/// its frames are for vblanks s on multiples of its divisor d, and it is woken at P(s) − W,
/// where P is the refresh model's prediction. Pure: the daemon feeds it the model and the clock.
public enum FramePacing {
    /// Frame timelines handed out with every tick: the target and the next three at the rate.
    public static let timelineCount = 4
    /// Bounds on the search for a frame: a jump of at most 2^40 frames (years at any rate), then
    /// at most this many single steps.
    static let maximumJump = 1_099_511_627_776.0
    static let maximumWalk = 4_096

    /// One scheduled frame: the target vblank, its predicted time, and when to wake for it.
    public struct Target: Sendable, Equatable {
        public var sequence: UInt64
        public var presentationNs: UInt64
        public var wakeNs: UInt64
    }

    /// The next target: the least multiple of `divisor` above `after` (the last target
    /// delivered, or the newest vblank seen) whose wake P(s) − W is not in the past. W may
    /// exceed a frame; the frames then overlap. `skipped` counts the multiples passed over
    /// because their wake time had gone (a late daemon or a W raised mid-stream).
    public static func nextTarget(
        after: UInt64, divisor: UInt32, workDurationNs: UInt64, nowNs: UInt64,
        periodNs: Double, predict: (UInt64) -> UInt64
    ) -> (target: Target, skipped: UInt64) {
        let d = UInt64(max(divisor, 1))
        let first = (after / d &+ 1) &* d
        var s = first
        // Jump close to the answer in one step (a long gap, a large W), then walk: rounding of
        // the prediction may leave the jump one multiple short.
        let wanted = nowNs &+ workDurationNs
        let p0 = predict(s)
        if p0 < wanted, periodNs > 0 {
            let frames = Double(wanted - p0) / (periodNs * Double(d))
            if frames.isFinite, frames > 1 { s &+= UInt64(min(frames, maximumJump).rounded(.down) - 1) &* d }
        }
        // Bounded: a degenerate prediction (it cannot happen with a fitted model) must not hang
        // the daemon's loop.
        var steps = 0
        while predict(s) < wanted, steps < maximumWalk {
            s &+= d
            steps += 1
        }
        let p = predict(s)
        return (Target(sequence: s, presentationNs: p, wakeNs: p &- workDurationNs), (s - first) / d)
    }

    /// The target and the vblanks after it at the subscription's rate, with predicted times.
    public static func timelines(from target: UInt64, divisor: UInt32, predict: (UInt64) -> UInt64) -> FrameTimelines {
        var out = FrameTimelines()
        let d = UInt64(max(divisor, 1))
        for k in 0..<UInt64(timelineCount) {
            let s = target &+ k &* d
            out.append(FrameTimeline(sequence: s, presentationNs: predict(s)))
        }
        return out
    }

    /// The newest vblank at or before `nowNs` by the model (for predicted ticks while a display
    /// is off): never below `atLeast`.
    public static func latestVBlank(atOrBefore nowNs: UInt64, atLeast: UInt64, periodNs: Double, predict: (UInt64) -> UInt64) -> UInt64 {
        var s = atLeast
        let p = predict(s)
        if nowNs > p, periodNs > 0 {
            let frames = Double(nowNs - p) / periodNs
            if frames.isFinite, frames > 1 { s &+= UInt64(min(frames, maximumJump).rounded(.down) - 1) }
        }
        var steps = 0
        while predict(s &+ 1) <= nowNs, steps < maximumWalk {
            s &+= 1
            steps += 1
        }
        return s
    }
}

/// One subscription's pacing state: the frame it will be woken for next, and the last frame it
/// handed out by either path (a paced wake-up, or a tick on a vblank without a work duration),
/// so that a reschedule (pause, a new rate or work duration) never hands out the same frame
/// twice. It is the one owner of "the last frame handed out": the vblank path asks
/// `isNew(_:)` and reports with `handedOut(_:)`.
///
/// A wake-up hands out its frame (`fire`) and aims at the next one only at the following
/// `update`: the daemon sends every due tick first and does the search after, off the path
/// between the timer and the client.
public struct FramePacer: Sendable, Equatable {
    public private(set) var target: FramePacing.Target?
    /// The last frame handed out (by a wake-up or on a vblank) or passed over: the next is
    /// aimed after it.
    private var lastFiredSequence: UInt64?
    /// The divisor and work duration `target` was chosen with: a change re-aims.
    private var divisor: UInt32 = 0
    private var workDurationNs: UInt64 = 0
    /// Frames passed over since the last one handed out, reported with the next.
    private var passedOver: UInt64 = 0
    /// The next aim follows a wake-up: frames it passes over (their wakes gone) are counted.
    /// Not after a reschedule: a pause or a new rate skips nothing the client was owed.
    private var countsPassed = false

    public init() {}

    /// The last frame handed out or passed over, nil before the first.
    public var lastHandedOut: UInt64? { lastFiredSequence }

    /// Whether a tick for `targetSequence`, sent on a vblank without a work duration, would
    /// hand out a frame not handed out yet (a wake-up with a longer work duration may already
    /// have handed it out).
    public func isNew(_ targetSequence: UInt64) -> Bool {
        lastFiredSequence.map { targetSequence > $0 } ?? true
    }

    /// A tick on a vblank handed out the frame for `targetSequence`: a work duration set later
    /// aims after it.
    public mutating func handedOut(_ targetSequence: UInt64) {
        lastFiredSequence = targetSequence
    }

    /// Forgets the scheduled frame; the next `update` chooses afresh.
    public mutating func reschedule() {
        target = nil
        countsPassed = false
    }

    /// Aims at the next frame, or re-predicts the one aimed at (the model moved), and returns
    /// its wake time. `latestSequence` is the newest vblank seen. `variable` (VRR, no grid): the
    /// next frame is always the first at the rate after the last one, however late: its vblank
    /// waits for the app's frame, so a wake gone by passes nothing over (it fires at once).
    public mutating func update(
        divisor: UInt32, workDurationNs: UInt64, latestSequence: UInt64, nowNs: UInt64,
        periodNs: Double, variable: Bool = false, predict: (UInt64) -> UInt64
    ) -> UInt64 {
        if divisor != self.divisor || workDurationNs != self.workDurationNs {
            self.divisor = divisor
            self.workDurationNs = workDurationNs
            reschedule()
        }
        if var t = target {
            t.presentationNs = predict(t.sequence)
            t.wakeNs = t.presentationNs &- workDurationNs
            target = t
            return t.wakeNs
        }
        // After a wake-up, on from the frame fired for, so that every frame since is counted,
        // also those the newest vblank has passed; else on from the newest vblank.
        let after = countsPassed ? lastFiredSequence ?? 0 : max(lastFiredSequence ?? 0, latestSequence)
        // Variable: `now` as early as the first candidate's wake, so nothing is walked past.
        let first = (after / UInt64(max(divisor, 1)) &+ 1) &* UInt64(max(divisor, 1))
        let next = FramePacing.nextTarget(
            after: after, divisor: divisor, workDurationNs: workDurationNs,
            nowNs: variable ? min(nowNs, predict(first) &- workDurationNs) : nowNs, periodNs: periodNs, predict: predict)
        if countsPassed { passedOver &+= next.skipped }
        countsPassed = false
        target = next.target
        return next.target.wakeNs
    }

    /// The wake-up came at `nowNs`: the frame now due, if any, and how many frames at the rate
    /// were passed over since the last one handed out (their wakes had gone by). A wake-up so
    /// late that its target vblank has already happened (with W = 0: the next one) hands out
    /// nothing: that frame is passed over too. Either way the frame is done with, and the next
    /// `update` aims at the one after it. Call `update` first.
    public mutating func fire(
        nowNs: UInt64, newestSequence: UInt64, periodNs: Double, variable: Bool = false
    ) -> (frame: FramePacing.Target, skipped: UInt64)? {
        guard let t = target, t.wakeNs <= nowNs else { return nil }
        // With a work duration the frame is useless once its vblank is shown (by the clock, or
        // by a real vblank already at or past it: the model lagging a mode change); without one
        // (a predicted vblank while the display is off) the tick is the vblank itself, news
        // until the next one at the rate.
        // Variable refresh: the display waits for the frame (up to its longest interval), so
        // the frame is due until its vblank has come, whatever the clock says.
        let due: Bool
        if variable {
            due = t.sequence > newestSequence
        } else if workDurationNs > 0 {
            due = t.presentationNs > nowNs && t.sequence > newestSequence
        } else {
            due = t.presentationNs &+ UInt64(periodNs * Double(max(divisor, 1))) > nowNs
        }
        target = nil
        lastFiredSequence = t.sequence
        countsPassed = true
        guard due else {
            passedOver &+= 1
            return nil
        }
        defer { passedOver = 0 }
        return (t, passedOver)
    }
}
