import VsyncClientCore
import VsyncCore

// The link's properties: the frame of the current callback, the display, and the settings.
extension DisplayLink {
    /// The frame of the current callback, read at once; nil before the first.
    ///
    /// Inside a callback (or an error or display-change handler) it is the frame that callback
    /// was called for, on every context alike: a link on a run loop and on a queue at once sees
    /// each context's own frame. Outside a callback it is the newest frame any context of the
    /// link took. The single-value properties (``timestamp``, ``targetTimestamp``, …) read it
    /// too, so inside a callback they always come from the same frame; outside one, read this
    /// property once rather than several of them.
    public var currentFrame: Frame? {
        if let delivered = CallbackFrame.current, delivered.link == ObjectIdentifier(self) { return delivered.frame }
        return withState { $0.lastFrame }
    }

    /// The vblank of the current callback, in seconds of CLOCK_MONOTONIC; 0 before the first.
    public var timestamp: Double { MonotonicClock.seconds(timestampNanoseconds) }
    /// ``timestamp`` in nanoseconds.
    public var timestampNanoseconds: UInt64 { currentFrame?.timestampNanoseconds ?? 0 }
    /// The predicted next vblank at this link's rate: the deadline for the frame being prepared.
    /// `targetTimestamp - timestamp` is the real frame time; 0 before the first callback.
    public var targetTimestamp: Double { MonotonicClock.seconds(targetTimestampNanoseconds) }
    /// ``targetTimestamp`` in nanoseconds.
    public var targetTimestampNanoseconds: UInt64 { currentFrame?.targetTimestampNanoseconds ?? 0 }
    /// The vblank sequence number of the current callback's frame.
    public var sequence: UInt64 { currentFrame?.sequence ?? 0 }
    /// Frames at this link's rate skipped just before the current one (slow callback, busy
    /// thread or a full socket).
    public var skippedFrames: Int { currentFrame?.skipped ?? 0 }
    /// The current frame's target vblank sequence: the vblank `targetTimestamp` is the time of.
    public var targetSequence: UInt64 { currentFrame?.targetSequence ?? 0 }
    /// The current frame's presentation candidates: the target, then up to three later vblanks
    /// at the link's rate. An app that needs longer than one frame aims at a later one.
    public var frameTimelines: FrameTimelines { currentFrame?.frameTimelines ?? FrameTimelines() }

    /// The display's frame interval at its maximum rate, in seconds. Follows mode changes.
    public var duration: Double { MonotonicClock.seconds(durationNanoseconds) }
    /// ``duration`` in nanoseconds; 0 until the daemon has answered.
    public var durationNanoseconds: UInt64 { withState { displayFacts($0).displayIntervalNs } }
    /// True when the ticks come from vsyncd's timer source rather than a real display.
    public var isSynthetic: Bool {
        if currentFrame?.flags.contains(.synthetic) == true { return true }
        return withState { displayFacts($0).synthetic }
    }

    /// Variable refresh (VRR) is on for the display, as vsyncd last said (protocol 5).
    public var isVariable: Bool {
        if let frame = currentFrame { return frame.isVariable }
        return withState { displayFacts($0).variable }
    }
    /// The shortest interval between vblanks the display can do (1 / the maximum rate of its
    /// variable refresh range), in seconds, as `CAMetalDisplayLink`'s and
    /// VK_EXT_present_timing's `refreshDuration`; 0 when the monitor cannot vary its refresh.
    public var minimumInterval: Double { MonotonicClock.seconds(withState { displayFacts($0).minIntervalNs }) }
    /// The longest (1 / the range's minimum rate), in seconds; 0 when not capable or unknown.
    public var maximumInterval: Double { MonotonicClock.seconds(withState { displayFacts($0).maxIntervalNs }) }

    /// The display's refresh rate rounded to whole frames per second, as `UIScreen` reports it
    /// (59.94 Hz gives 60); 0 until the daemon has answered.
    public var maximumFramesPerSecond: Int {
        let facts = withState { displayFacts($0) }
        if facts.refreshMillihertz > 0 { return Int((Double(facts.refreshMillihertz) / 1000).rounded()) }
        if facts.displayIntervalNs > 0 { return Int((1e9 / Double(facts.displayIntervalNs)).rounded()) }
        return 0
    }

    /// Stops (true) or restarts (false) the callbacks. Paused, the daemon sends nothing.
    public var isPaused: Bool {
        get { withState { settings($0).paused } }
        set { updateSettings { $0.paused = newValue } }
    }

    /// The rate the link would like, in frames per second; 0 (the default) means the display's
    /// maximum. The delivered rate is a whole divisor of the refresh: at 60 Hz, 60, 30, 20, 15 …
    /// Reads ``preferredFrameRateRange``'s preferred rate, rounded.
    public var preferredFramesPerSecond: Int {
        get { Int(preferredFrameRateRange.preferred.rounded()) }
        set { updateSettings { $0.range = FrameRateRange(preferredFramesPerSecond: max(0, newValue)) } }
    }

    /// The rates the link accepts; the daemon picks the divisor of the refresh inside the range
    /// nearest to `preferred`. `.default` means the display's maximum.
    public var preferredFrameRateRange: FrameRateRange {
        get { withState { settings($0).range } }
        set { updateSettings { $0.range = newValue } }
    }

    /// Why ``setWorkDuration(_:)`` refused a value: one line saying what to do.
    public struct InvalidWorkDuration: Error, Sendable, Equatable, CustomStringConvertible {
        /// The value refused.
        public var requested: Duration
        public var description: String {
            "work duration \(requested) is out of range: use 0 to 1 s (the daemon paces at most one second ahead)"
        }
    }

    /// How long before its target vblank each frame's callback runs: the time the app needs to
    /// render and present. Zero (the default) runs the callback just after each vblank, as
    /// CADisplayLink does; above zero, vsyncd wakes the link at `targetTimestamp − workDuration`
    /// and `targetTimestamp` is the vblank to present at. Set it with ``setWorkDuration(_:)``.
    public var workDuration: Duration { .nanoseconds(Int64(withState { settings($0).workDurationNs })) }

    /// Sets ``workDuration``. It may exceed a frame (frames then overlap), up to one second.
    /// A negative value or one over a second throws ``InvalidWorkDuration`` and changes
    /// nothing, as `vsync_link_set_work_duration` returns `-EINVAL` in C: it is never clamped.
    /// Needs vsyncd 0.3.0 or later; an older one ignores it.
    public func setWorkDuration(_ duration: Duration) throws(InvalidWorkDuration) {
        guard duration >= .zero, duration <= .nanoseconds(Int64(WorkDuration.maximumNs)) else {
            throw InvalidWorkDuration(requested: duration)
        }
        let (seconds, attoseconds) = duration.components
        let ns = UInt64(seconds) * 1_000_000_000 + UInt64(attoseconds / 1_000_000_000)
        updateSettings { $0.workDurationNs = ns }
    }

    /// While the display is off (or its driver refuses vblank events), keep calling back at the
    /// last mode's rate with predicted frames (`Frame.flags` has `.predicted`). Off by default:
    /// the callbacks stop until the display is on.
    public var predictsWhileOff: Bool {
        get { withState { settings($0).predictsWhileOff } }
        set { updateSettings { $0.predictsWhileOff = newValue } }
    }

    /// Every frame from a real vblank, never model-timed (`Frame.isModelTimed` false), even when
    /// vsyncd samples vblanks sparsely (`--vblank-sampling sparse`). It costs what sparse sampling
    /// saves: while the link runs, vsyncd keeps its display's vblank interrupt on (a laptop panel
    /// cannot self-refresh) and the display's other links get hardware frames too. For a
    /// frame-timing tool or a test that must see every real vblank; apps should leave it off (the
    /// default). A vsyncd older than protocol 6, or one sampling continuously, gives every frame
    /// from the hardware anyway. Set on a running link, the link is renewed with it at once.
    public var hardwareTicks: Bool {
        get { withState { settings($0).hardwareTicks } }
        set { updateSettings { $0.hardwareTicks = newValue } }
    }

    /// Page only (protocol 5): vsyncd sends the link no ticks; it keeps its display's vblank
    /// events on, so the display's record on vsyncd's timing page stays current for an app that
    /// paces itself with its own timer from ``DisplayLink/timing(of:socketPath:)``. With a work
    /// duration the link is paced from the page: the connection's own timer wakes it that long
    /// before each target vblank and the callback gets the frame, with no message from vsyncd;
    /// without one, no callbacks. Off by default; a daemon without protocol 5 ignores it and the
    /// callbacks come as usual.
    public var pageOnly: Bool {
        get { withState { settings($0).pageOnly } }
        set { updateSettings { $0.pageOnly = newValue } }
    }

    /// Called with errors (no daemon, display gone, …) on the link's context: its first run
    /// loop, else its queue, else a global queue. The link keeps retrying connection errors
    /// by itself; after `.displayGone` it stays silent until that display is added again.
    public var errorHandler: (@Sendable (DisplayLinkError) -> Void)? {
        get { withState { $0.errorHandler } }
        set { withState { $0.errorHandler = newValue } }
    }

    /// Called on the link's context when its display changes mode, turns off or on.
    public var displayChangeHandler: (@Sendable (DisplayChange) -> Void)? {
        get { withState { $0.displayChangeHandler } }
        set { withState { $0.displayChangeHandler = newValue } }
    }
}
