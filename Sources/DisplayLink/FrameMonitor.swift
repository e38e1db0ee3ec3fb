import Dispatch
import Foundation
import Synchronization
import VsyncCore

/// An FPS and hitch monitor: the classic `FPSMonitor` on a display link, with a hang detector.
///
/// The monitor makes a ``DisplayLink`` of its own (``link``) at the display's full rate, and
/// every figure it reports is of that link's callbacks on the context you schedule it on, not
/// of any other link in the app. That is the point: the callback rate reflects how busy that
/// thread is, not the display, so a monitor scheduled where your drawing runs (the main run
/// loop, or your link's queue) counts the frames that context could actually have drawn. Your
/// own link's skipped frames are in its ``DisplayLink/skippedFrames``.
///
/// Every `window` seconds it reports the frames per second over that window, the frames its
/// link skipped (because the thread or a callback was too slow), the callbacks that overran
/// their `targetTimestamp`, the hitches: gaps between callbacks longer than `hitchThreshold`,
/// and the late frames by reason (``FrameJankReason``, by ``FrameJankTracker``'s rules: the
/// app's own work, a tick delivered late, the display's prediction, mode or power).
///
/// The monitor does not retain its owner; it owns its link and invalidates it when released.
public final class FrameMonitor: Sendable {
    /// One window's figures.
    public struct Report: Sendable, Equatable {
        /// Callbacks per second over the window, from the frames' vblank timestamps.
        public var framesPerSecond: Double
        /// Callbacks in the window.
        public var frames: Int
        /// The window's length in seconds.
        public var window: Double
        /// Frames at the link's rate skipped in the window.
        public var droppedFrames: Int
        /// Callbacks whose `work` (or, without work, whose start) came after `targetTimestamp`:
        /// the frame being prepared missed its deadline.
        public var overruns: Int
        /// Gaps between callbacks longer than the hitch threshold.
        public var hitches: Int
        /// The monitored ``FrameWork``'s requests in the window, by how they ended (`outstanding`
        /// at its end); all zero without one. In ``FrameMonitor/totals``, counted from the
        /// monitor's start, so a request made after it is counted whenever it ends.
        public var frameWork = FrameWorkCounts()
        /// Late frames by reason (never `onTime`): each callback's frame judged as
        /// ``FrameJankTracker`` does, its work being the monitor's `work` (or nothing).
        public var lateFrames: [FrameJankReason: Int] = [:]
        /// All late frames: the sum of ``lateFrames``.
        public var late: Int { lateFrames.values.reduce(0, +) }
    }

    /// A frame that was late, and why.
    public struct LateFrame: Sendable, Equatable {
        public var reason: FrameJankReason
        /// The vblank the frame was for: its tick's `targetSequence`.
        public var targetSequence: UInt64
        /// When its callback began and its work ended (CLOCK_MONOTONIC ns).
        public var startNanoseconds: UInt64
        public var endNanoseconds: UInt64
    }

    /// A stall: two callbacks further apart than the threshold.
    public struct Hitch: Sendable, Equatable {
        /// The gap between the two callbacks, in seconds.
        public var duration: Double
        /// The CLOCK_MONOTONIC time the late callback ran, in seconds.
        public var timestamp: Double
        /// Frames skipped across the gap.
        public var droppedFrames: Int
    }

    /// The link the monitor counts; schedule it with the monitor's ``add(to:forMode:)`` or ``start(on:)``.
    public let link: DisplayLink
    private let counter: Counter

    /// Creates a monitor of `display`.
    ///
    /// - Parameters:
    ///   - window: seconds per report; at least 1 (shorter values are raised to 1).
    ///   - hitchThreshold: a gap between callbacks longer than this is a hitch (50 ms: three
    ///     frames at 60 Hz, the usual threshold of a hang detector).
    ///   - work: optional per-frame work to run and time; an overrun is counted when it ends after
    ///     the frame's `targetTimestamp`.
    ///   - onReport: called on the link's context at the end of each window.
    ///   - onHitch: called on the link's context for every hitch.
    ///   - frameWork: a ``FrameWork`` (or anything that counts frame work) whose requests each
    ///     report counts next to the dropped frames and hitches, from the monitor's start.
    public init(
        display: DisplaySelector = .primary, socketPath: String? = nil,
        window: Double = 1, hitchThreshold: Double = 0.05,
        work: (@Sendable (DisplayLink) -> Void)? = nil,
        frameWork: (any FrameWorkCounting)? = nil,
        onReport: @escaping @Sendable (Report) -> Void,
        onHitch: (@Sendable (Hitch) -> Void)? = nil
    ) {
        let counter = Counter(
            windowNs: UInt64(max(window, 1) * 1e9), hitchNs: UInt64(max(hitchThreshold, 0) * 1e9),
            work: work, frameWork: frameWork, onReport: onReport, onHitch: onHitch)
        self.counter = counter
        // The handler holds the counter, not the monitor: no cycle through the link.
        link = DisplayLink(display: display, socketPath: socketPath) { link in counter.record(link) }
        link.observeHangs { event in counter.record(event) }
    }

    deinit { link.invalidate() }

    /// Monitors on `runLoop` in `mode` (`.main` and `.common` count the main thread in every
    /// mode). The monitor starts here: the frame work's counts are taken from now.
    public func add(to runLoop: RunLoop, forMode mode: RunLoop.Mode) {
        counter.start()
        link.add(to: runLoop, forMode: mode)
    }

    /// Monitors on a dispatch queue. The monitor starts here: the frame work's counts are
    /// taken from now.
    public func start(on queue: DispatchQueue) {
        counter.start()
        link.start(on: queue)
    }

    /// Stops monitoring for good.
    public func invalidate() { link.invalidate() }

    /// Totals since the monitor started: its frames from its first callback (which starts the
    /// clock of `framesPerSecond`), the frame work's counts from ``start(on:)`` or
    /// ``add(to:forMode:)``.
    public var totals: Report { counter.totals }

    /// Also writes every frame from now on to a Perfetto trace (protobuf) at `path`, replacing
    /// the file: the display's vblanks and each frame's expected and actual timeline as
    /// FrameTimeline's app frames, on CLOCK_MONOTONIC, the frame's ``FrameJankReason`` as its
    /// jank type. Open it in ui.perfetto.dev or trace_processor; it is whole after every frame.
    /// With ``link``'s hang detector on (``DisplayLink/detectHangs(with:name:)``), each hang is a
    /// slice `hang` on a track `hangs <name>` in the app's group, its stack as an argument.
    public func recordTrace(to path: String) throws(TraceFileError) {
        try counter.recordTrace(to: path, layerName: "FrameMonitor")
    }

    /// Called on the link's context after each late frame's callback, with its reason.
    public var lateFrameHandler: (@Sendable (LateFrame) -> Void)? {
        get { counter.lateFrameHandler }
        set { counter.lateFrameHandler = newValue }
    }

    /// Errors of the underlying link (no daemon, display gone).
    public var errorHandler: (@Sendable (DisplayLinkError) -> Void)? {
        get { link.errorHandler }
        set { link.errorHandler = newValue }
    }
}

/// The monitor's arithmetic; lives in the link's handler.
private final class Counter: Sendable {
    struct Window {
        var startTimestampNs: UInt64 = 0
        var frames = 0
        var dropped = 0
        var overruns = 0
        var hitches = 0
        var late: [FrameJankReason: Int] = [:]
    }

    struct State {
        var window = Window()
        var total = Window()
        /// The frame work's counts when the window and the monitor began (nil: not started).
        var workAtWindow = FrameWorkCounts()
        var workAtStart: FrameWorkCounts?
        var lastCallbackNs: UInt64 = 0
        var lastTimestampNs: UInt64 = 0
        var jank = FrameJankTracker()
        var trace: FrameTraceFile?
        var lateFrameHandler: (@Sendable (FrameMonitor.LateFrame) -> Void)?
    }

    let windowNs: UInt64
    let hitchNs: UInt64
    let work: (@Sendable (DisplayLink) -> Void)?
    let frameWork: (any FrameWorkCounting)?
    let onReport: @Sendable (FrameMonitor.Report) -> Void
    let onHitch: (@Sendable (FrameMonitor.Hitch) -> Void)?
    private let state = Mutex(State())

    init(
        windowNs: UInt64, hitchNs: UInt64, work: (@Sendable (DisplayLink) -> Void)?, frameWork: (any FrameWorkCounting)?,
        onReport: @escaping @Sendable (FrameMonitor.Report) -> Void, onHitch: (@Sendable (FrameMonitor.Hitch) -> Void)?
    ) {
        self.windowNs = windowNs
        self.hitchNs = hitchNs
        self.work = work
        self.frameWork = frameWork
        self.onReport = onReport
        self.onHitch = onHitch
    }

    /// The monitor was scheduled: the frame work is counted from here (the first scheduling only).
    func start() {
        let counts = frameWork?.counts ?? FrameWorkCounts()
        state.withLock { s in
            guard s.workAtStart == nil else { return }
            s.workAtStart = counts
            s.workAtWindow = counts
        }
    }

    func record(_ link: DisplayLink) {
        guard let frame = link.currentFrame else { return }
        let now = MonotonicClock.nanoseconds()
        var ended = now
        if let work {
            work(link)
            ended = MonotonicClock.nanoseconds()
        }
        let overran = ended > frame.targetTimestampNanoseconds
        let workDurationNs = link.withState { link.settings($0).workDurationNs }
        let tick = FrameTick(frame, workDurationNs: workDurationNs, startNs: now, endNs: ended)
        let workCounts = frameWork?.counts ?? FrameWorkCounts()
        typealias LateCall = (handler: @Sendable (FrameMonitor.LateFrame) -> Void, frame: FrameMonitor.LateFrame)
        let (report, hitch, lateCall) = state.withLock { s -> (FrameMonitor.Report?, FrameMonitor.Hitch?, LateCall?) in
            var hitch: FrameMonitor.Hitch?
            if s.lastCallbackNs > 0, now - s.lastCallbackNs > hitchNs {
                hitch = FrameMonitor.Hitch(
                    duration: Double(now - s.lastCallbackNs) / 1e9,
                    timestamp: Double(now) / 1e9, droppedFrames: frame.skipped)
            }
            s.lastCallbackNs = now
            let (facts, verdict) = s.jank.frame(tick)
            s.trace?.record(tick, facts: facts, jank: verdict)
            let reason = verdict.reason
            let lateCall =
                reason == .onTime
                ? nil
                : s.lateFrameHandler.map {
                    (
                        $0,
                        FrameMonitor.LateFrame(
                            reason: reason, targetSequence: frame.targetSequence, startNanoseconds: now, endNanoseconds: ended)
                    )
                }
            if s.workAtStart == nil {  // its link was scheduled directly, not through the monitor
                s.workAtStart = workCounts
                s.workAtWindow = workCounts
            }
            // The first callback only starts the clock: a rate needs an interval.
            guard s.window.startTimestampNs > 0 else {
                s.window.startTimestampNs = frame.timestampNanoseconds
                s.total.startTimestampNs = frame.timestampNanoseconds
                return (nil, nil, lateCall)
            }
            for w in [\State.window, \State.total] {
                s[keyPath: w].frames += 1
                s[keyPath: w].dropped += frame.skipped
                if overran { s[keyPath: w].overruns += 1 }
                if hitch != nil { s[keyPath: w].hitches += 1 }
                if reason != .onTime { s[keyPath: w].late[reason, default: 0] += 1 }
            }
            s.lastTimestampNs = frame.timestampNanoseconds
            guard frame.timestampNanoseconds >= s.window.startTimestampNs + windowNs else { return (nil, hitch, lateCall) }
            var report = Self.report(s.window, until: frame.timestampNanoseconds)
            report.frameWork = workCounts.since(s.workAtWindow)
            s.window = Window(startTimestampNs: frame.timestampNanoseconds)
            s.workAtWindow = workCounts
            return (report, hitch, lateCall)
        }
        if let lateCall { lateCall.handler(lateCall.frame) }
        if let hitch { onHitch?(hitch) }
        if let report { onReport(report) }
    }

    /// A hang of the link's context, on the detector's watcher thread: written at once, under
    /// the lock the frames are written under (the one owner of the file). The hung context
    /// cannot be holding it, as the app's code never runs under it, so the watcher waits at
    /// most for one frame's write; left to the context, a hang would be written once it ended.
    func record(_ hang: HangDetector.Event) { state.withLock { $0.trace?.record(hang) } }

    var lateFrameHandler: (@Sendable (FrameMonitor.LateFrame) -> Void)? {
        get { state.withLock { $0.lateFrameHandler } }
        set { state.withLock { $0.lateFrameHandler = newValue } }
    }

    func recordTrace(to path: String, layerName: String) throws(TraceFileError) {
        let file = try FrameTraceFile(path: path, layerName: layerName)
        state.withLock { $0.trace = file }
    }

    var totals: FrameMonitor.Report {
        let workCounts = frameWork?.counts ?? FrameWorkCounts()
        return state.withLock { s in
            var report = Self.report(s.total, until: s.lastTimestampNs)
            report.frameWork = workCounts.since(s.workAtStart ?? workCounts)
            return report
        }
    }

    private static func report(_ w: Window, until endNs: UInt64) -> FrameMonitor.Report {
        let seconds = endNs > w.startTimestampNs ? Double(endNs - w.startTimestampNs) / 1e9 : 0
        return FrameMonitor.Report(
            framesPerSecond: seconds > 0 ? Double(w.frames) / seconds : 0, frames: w.frames, window: seconds,
            droppedFrames: w.dropped, overruns: w.overruns, hitches: w.hitches, lateFrames: w.late)
    }
}

extension FrameTick {
    /// A link's frame as the app handled it: its callback from `startNs` to `endNs`.
    public init(_ f: DisplayLink.Frame, workDurationNs: UInt64 = 0, startNs: UInt64, endNs: UInt64) {
        let divisor = f.frameTimelines.count > 1 ? f.frameTimelines[1].sequence &- f.frameTimelines[0].sequence : 1
        self.init(
            sequence: f.sequence, timestampNs: f.timestampNanoseconds, targetSequence: f.targetSequence,
            targetTimestampNs: f.targetTimestampNanoseconds, periodNs: f.durationNanoseconds, divisor: divisor,
            workDurationNs: workDurationNs, flags: f.flags, generation: f.generation, startNs: startNs, endNs: endNs)
    }
}
