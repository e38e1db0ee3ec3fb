import Dispatch
import Foundation
import Synchronization
import VsyncClientCore
import VsyncCore

/// A timer bound to a display's vertical blank, like `CADisplayLink`, fed by the vsyncd daemon.
///
/// Create a link with a handler, then schedule it on a run loop (``add(to:forMode:)``), on a
/// dispatch queue (``start(on:)``), on the library's reader thread (``start()``), or iterate
/// ``frames``. Each callback belongs to one vblank:
/// ``timestamp`` is that vblank, ``targetTimestamp`` the next one at the link's rate (the deadline
/// for the frame being prepared), ``duration`` the display's frame interval.
///
/// A slow callback skips frames rather than queueing them: every context (run loop, queue,
/// reader thread, stream) has one mailbox holding at most one frame, always the newest tick,
/// whose ``skippedFrames`` counts the ones it replaced.
///
/// ## No retain cycle
/// `CADisplayLink` retains its target, and the run loop retains the link, so a view controller
/// that owns a link never deallocates until the link is invalidated. This link never retains the
/// object that owns it: ``init(target:display:socketPath:handler:)`` holds `target` weakly and
/// invalidates the link when the target is gone. With the closure form, capture the owner
/// `[weak self]` as usual.
///
/// Like `CADisplayLink`, a scheduled link is kept alive by the library until it is
/// ``invalidate()``d or removed from its last run loop mode, queue and stream.
///
/// All properties are thread-safe.
public final class DisplayLink: Sendable {
    /// Which display a link follows (vsyncd's wire selector): `.primary`, `.connector("HDMI-A-1")`,
    /// `.crtc(id)` or `.display(id)`.
    public typealias Selector = DisplaySelector
    /// The frame rates a link accepts, like `CAFrameRateRange`.
    public typealias RateRange = FrameRateRange

    /// The display this link follows.
    public let display: DisplaySelector
    /// The vsyncd socket this link talks to.
    public let socketPath: String

    private let connection: DisplayLinkConnection
    private let state: Mutex<State>

    /// One run loop the link is scheduled on: one timer in every mode it was added for. The
    /// timer's fire date is set to "now" when a tick arrives, which wakes the run loop only when
    /// it runs one of those modes, and fires at most once however many ticks came meanwhile.
    ///
    /// `@unchecked Sendable` (so the link's state can live in a `Mutex`): the run loop and timer
    /// are only added to and removed from under the link's lock, and a timer's fire date may be
    /// set from any thread.
    private struct RunLoopTarget: @unchecked Sendable {
        let runLoop: RunLoop
        var modes: Set<RunLoop.Mode>
        var timer: Timer
        var mailbox = Mailbox()
    }

    /// A stream's mailbox, held weakly: the stream's iterator owns it.
    private struct StreamRef {
        weak var stream: FrameStream?
    }

    private struct State {
        var handler: (@Sendable (DisplayLink) -> Void)?
        var errorHandler: (@Sendable (DisplayLinkError) -> Void)?
        var displayChangeHandler: (@Sendable (DisplayChange) -> Void)?
        var valid = true
        var subscriptionID: UInt32?
        // The link's settings; the connection's core holds the wire copy it renews on reconnect.
        var range = FrameRateRange.default
        var preferredFramesPerSecond = 0
        var paused = false
        var workDurationNs: UInt64 = 0
        var predictsWhileOff = false
        /// The frame of the current (or last) callback.
        var current: Frame?
        var refreshMillihertz: UInt64 = 0
        var displayIntervalNs: UInt64 = 0
        var syntheticDisplay = false
        // The delivery contexts, each with its mailbox.
        var runLoops: [RunLoopTarget] = []
        var queue: DispatchQueue?
        var queueMailbox = Mailbox()
        /// Started with ``start()``: the handler runs on the connection's reader thread.
        var direct = false
        var directMailbox = Mailbox()
        var streams: [Int: StreamRef] = [:]
        var nextStreamID = 0
        /// What the connection was last told by ``reportDelivery(_:)``.
        var reportedInlineQueue: DispatchQueue?

        var hasTargets: Bool { !runLoops.isEmpty || queue != nil || direct || !streams.isEmpty }

        /// The queue the reader thread may run this link's callbacks on inline (inside
        /// `queue.sync`, one thread wake-up per tick instead of two): only while a queue is the
        /// link's one context. Never the main queue, whose callbacks belong on the main thread.
        var inlineQueue: DispatchQueue? {
            guard let queue, runLoops.isEmpty, streams.isEmpty, !direct,
                  queue.label != DispatchQueue.main.label else { return nil }
            return queue
        }
    }

    /// Creates a link that calls `handler` once per frame of `display`, once scheduled.
    ///
    /// - Parameters:
    ///   - display: the display to follow; `.primary` by default.
    ///   - socketPath: the vsyncd socket; nil means `$VSYNCD_SOCKET`, else `/run/vsyncd/vsyncd.sock`.
    ///   - handler: called with the link on the context it is scheduled on. Capture the object
    ///     that owns the link weakly, or use ``init(target:display:socketPath:handler:)``.
    public init(
        display: DisplaySelector = .primary, socketPath: String? = nil,
        handler: @escaping @Sendable (DisplayLink) -> Void
    ) {
        self.display = display
        self.socketPath = DisplayLinkConnection.resolvedPath(socketPath)
        self.connection = DisplayLinkConnection.shared(socketPath: self.socketPath)
        self.state = Mutex(State(handler: handler))
    }

    /// Creates a link that calls `handler(target, link)` once per frame, holding `target` weakly.
    ///
    /// The target form of `CADisplayLink(target:selector:)` without its retain cycle: when
    /// `target` is deallocated, the link invalidates itself at its next frame. `handler` is
    /// called on the context the link is scheduled on (its run loop or queue), so it may touch
    /// state confined to that context.
    public convenience init<T: AnyObject>(
        target: T, display: DisplaySelector = .primary, socketPath: String? = nil,
        handler: @escaping (T, DisplayLink) -> Void
    ) {
        let box = WeakTarget(target, handler)
        self.init(display: display, socketPath: socketPath) { link in
            guard let target = box.target else {
                link.invalidate()
                return
            }
            box.handler(target, link)
        }
    }

    /// The current CLOCK_MONOTONIC time in seconds: the clock of ``timestamp`` and
    /// ``targetTimestamp`` (as `CACurrentMediaTime()` is for `CADisplayLink`).
    public static func currentTime() -> Double { MonotonicClock.seconds(MonotonicClock.nanoseconds()) }

    /// The current CLOCK_MONOTONIC time in nanoseconds.
    public static func currentTimeNanoseconds() -> UInt64 { MonotonicClock.nanoseconds() }

    /// Every access to the link's state. Lock order: this lock, then the connection's, never
    /// the reverse (see ``DisplayLinkConnection``).
    private func withState<R>(_ body: (inout State) -> R) -> R {
        assert(!connection.isCoreLockedByCurrentThread, "lock order: a link's lock is taken before the connection's, never inside it")
        return state.withLock { body(&$0) }
    }

    // MARK: Scheduling

    /// Fires the link on `runLoop` while it runs `mode`.
    ///
    /// A link added for `.default` does not fire while the run loop runs another mode (a
    /// tracking mode, say); one added for `.common` fires in every mode the run loop counts as
    /// common. A link may be added for several modes. Adding an invalidated link does nothing.
    public func add(to runLoop: RunLoop, forMode mode: RunLoop.Mode) {
        withState { s in
            guard s.valid else { return }
            if let i = s.runLoops.firstIndex(where: { $0.runLoop === runLoop }) {
                guard !s.runLoops[i].modes.contains(mode) else { return }
                s.runLoops[i].modes.insert(mode)
                runLoop.add(s.runLoops[i].timer, forMode: mode)
                return
            }
            let timer = makeTimer(for: runLoop)
            s.runLoops.append(RunLoopTarget(runLoop: runLoop, modes: [mode], timer: timer))
            runLoop.add(timer, forMode: mode)
            subscribeIfNeeded(&s)
        }
    }

    /// Stops firing the link on `runLoop` in `mode`. Removed from its last mode, queue and
    /// stream, the link unsubscribes and the library stops keeping it alive.
    public func remove(from runLoop: RunLoop, forMode mode: RunLoop.Mode) {
        let (old, new) = withState { s -> (Timer?, Timer?) in
            guard let i = s.runLoops.firstIndex(where: { $0.runLoop === runLoop }),
                  s.runLoops[i].modes.contains(mode) else { return (nil, nil) }
            let old = s.runLoops[i].timer
            s.runLoops[i].modes.remove(mode)
            if s.runLoops[i].modes.isEmpty {
                s.runLoops.remove(at: i)
                unsubscribeIfUnused(&s)
                return (old, nil)
            }
            // Foundation cannot take a timer out of one mode only: replace it.
            let timer = makeTimer(for: runLoop)
            s.runLoops[i].timer = timer
            for m in s.runLoops[i].modes { runLoop.add(timer, forMode: m) }
            return (old, s.runLoops[i].mailbox.repoke() ? timer : nil)
        }
        old?.invalidate()
        new?.fireDate = Date()
    }

    /// Fires the link on `queue`. At most one callback is queued at a time; a tick that arrives
    /// while one is pending replaces it. Calling it again moves the link to the new queue (and
    /// off the reader thread, if it was started with ``start()``).
    ///
    /// When every link of the process on this socket runs on this one queue (the usual case: one
    /// link, or all links on one render queue) and it is not the main queue, the library's reader
    /// thread runs the handler itself inside `queue.sync`: still on `queue`, serialized with its
    /// other work, but with one thread wake-up per frame instead of two. While the queue is busy
    /// the reader waits, and then delivers only the newest tick, so a busy queue skips frames
    /// rather than queueing them. Once the queue has kept the reader waiting over 250 ms (it
    /// runs long work too), the process's links go back to `async` delivery for good, so that
    /// the socket is always read and the daemon never takes the process for a stalled client.
    /// Links on several queues, run loops or streams are posted to with `async` from the start,
    /// so no queue's backlog can hold up another's links.
    public func start(on queue: DispatchQueue) {
        withState { s in
            guard s.valid else { return }
            s.queue = queue
            s.direct = false
            s.directMailbox = Mailbox()
            subscribeIfNeeded(&s)
        }
    }

    /// Fires the link directly on the library's reader thread, the thread that receives the
    /// ticks from vsyncd, like `CVDisplayLink`'s callback on its own thread.
    ///
    /// This saves a thread wake-up per frame over ``start(on:)``, and so latency and CPU, but
    /// the handler runs on a thread you do not own:
    /// - Keep it short and never block in it. While it runs, the reader thread reads nothing:
    ///   the other links of the process on the same socket that use this mode wait for it
    ///   (links on queues and run loops have already been handed their frame), and requests
    ///   such as ``isPaused`` changes are sent after it returns.
    /// - A slow handler skips frames rather than queueing them: when it returns, only the
    ///   newest tick is delivered, and ``skippedFrames`` counts the rest.
    /// - ``errorHandler`` and ``displayChangeHandler`` are called on the same thread.
    /// - The handler may use the link (read its properties, pause it, ``invalidate()`` it)
    ///   and make other links; hop to your own queue for anything else.
    ///
    /// Calling ``start(on:)`` moves the link to a queue; ``stop()`` stops it.
    public func start() {
        withState { s in
            guard s.valid else { return }
            s.queue = nil
            s.queueMailbox.dropFrame()
            s.direct = true
            subscribeIfNeeded(&s)
        }
    }

    /// Stops firing the link on its dispatch queue or reader thread (``start(on:)``, ``start()``).
    public func stop() {
        withState { s in
            s.queue = nil
            s.queueMailbox.dropFrame()
            s.direct = false
            s.directMailbox = Mailbox()
            unsubscribeIfUnused(&s)
        }
    }

    /// The link's frames as an async sequence. Each access makes a new stream with a mailbox
    /// that keeps only the newest frame, so a slow consumer skips frames instead of falling
    /// behind; ``Frame/skipped`` counts the ones it skipped, as for callbacks. Streams end on
    /// ``invalidate()``. Making a stream subscribes the link, like scheduling it; the link's
    /// handler is not called for stream frames. Ending the iteration removes the stream.
    public var frames: AsyncStream<Frame> {
        let id = withState { s -> Int in
            let id = s.nextStreamID
            s.nextStreamID += 1
            return id
        }
        let stream = FrameStream { [weak self] in self?.removeStream(id) }
        let added = withState { s -> Bool in
            guard s.valid else { return false }
            s.streams[id] = StreamRef(stream: stream)
            subscribeIfNeeded(&s)
            return true
        }
        if !added { stream.finish() }
        return AsyncStream(unfolding: { await stream.next() }, onCancel: { stream.finish() })
    }

    private func removeStream(_ id: Int) {
        withState { s in
            guard s.streams.removeValue(forKey: id) != nil else { return }
            unsubscribeIfUnused(&s)
        }
    }

    /// Stops the link for good: unsubscribes, removes it from every run loop mode and queue,
    /// ends its streams and releases the handlers. Thread-safe and idempotent.
    public func invalidate() {
        let (timers, streams, id) = withState { s -> ([Timer], [FrameStream], UInt32?) in
            guard s.valid else { return ([], [], nil) }
            s.valid = false
            s.handler = nil
            s.errorHandler = nil
            s.displayChangeHandler = nil
            let timers = s.runLoops.map(\.timer)
            let streams = s.streams.values.compactMap(\.stream)
            s.runLoops = []
            s.queue = nil
            s.queueMailbox = Mailbox()
            s.direct = false
            s.directMailbox = Mailbox()
            s.streams = [:]
            let id = s.subscriptionID
            s.subscriptionID = nil
            s.reportedInlineQueue = nil
            return (timers, streams, id)
        }
        for timer in timers { timer.invalidate() }
        for stream in streams { stream.finish() }
        if let id { connection.unregister(id) }
    }

    /// False once ``invalidate()`` was called (or the target of a target-form link went away).
    public var isValid: Bool { withState { $0.valid } }

    // MARK: Properties

    /// The whole frame of the current (or last) callback, read at once; nil before the first.
    public var currentFrame: Frame? { withState { $0.current } }

    /// The vblank of the current callback, in seconds of CLOCK_MONOTONIC; 0 before the first.
    public var timestamp: Double { MonotonicClock.seconds(timestampNanoseconds) }
    /// ``timestamp`` in nanoseconds.
    public var timestampNanoseconds: UInt64 { withState { $0.current?.timestampNanoseconds ?? 0 } }
    /// The predicted next vblank at this link's rate: the deadline for the frame being prepared.
    /// `targetTimestamp - timestamp` is the real frame time; 0 before the first callback.
    public var targetTimestamp: Double { MonotonicClock.seconds(targetTimestampNanoseconds) }
    /// ``targetTimestamp`` in nanoseconds.
    public var targetTimestampNanoseconds: UInt64 { withState { $0.current?.targetTimestampNanoseconds ?? 0 } }
    /// The display's frame interval at its maximum rate, in seconds. Follows mode changes.
    public var duration: Double { MonotonicClock.seconds(durationNanoseconds) }
    /// ``duration`` in nanoseconds; 0 until the daemon has answered.
    public var durationNanoseconds: UInt64 { withState { $0.displayIntervalNs } }
    /// The vblank sequence number of the current callback's frame.
    public var sequence: UInt64 { withState { $0.current?.sequence ?? 0 } }
    /// Frames at this link's rate skipped just before the current one (slow callback, busy
    /// thread or a full socket).
    public var skippedFrames: Int { withState { $0.current?.skipped ?? 0 } }
    /// True when the ticks come from vsyncd's timer source rather than a real display.
    public var isSynthetic: Bool {
        withState { $0.syntheticDisplay || ($0.current?.flags.contains(.synthetic) ?? false) }
    }

    /// The display's refresh rate rounded to whole frames per second, as `UIScreen` reports it
    /// (59.94 Hz gives 60); 0 until the daemon has answered.
    public var maximumFramesPerSecond: Int {
        withState { s in
            if s.refreshMillihertz > 0 { return Int((Double(s.refreshMillihertz) / 1000).rounded()) }
            if s.displayIntervalNs > 0 { return Int((1e9 / Double(s.displayIntervalNs)).rounded()) }
            return 0
        }
    }

    /// Stops (true) or restarts (false) the callbacks. Paused, the daemon sends nothing.
    public var isPaused: Bool {
        get { withState { $0.paused } }
        set {
            withState { s in
                guard s.paused != newValue else { return }
                s.paused = newValue
                if newValue {
                    s.queueMailbox.dropFrame()
                    s.directMailbox.dropFrame()
                    for i in s.runLoops.indices { s.runLoops[i].mailbox.dropFrame() }
                }
                if let id = s.subscriptionID { connection.setPaused(id, newValue) }
            }
        }
    }

    /// The rate the link would like, in frames per second; 0 (the default) means the display's
    /// maximum. The delivered rate is a whole divisor of the refresh: at 60 Hz, 60, 30, 20, 15 …
    public var preferredFramesPerSecond: Int {
        get { withState { $0.preferredFramesPerSecond } }
        set {
            let fps = max(0, newValue)
            setRange(FrameRateRange(preferredFramesPerSecond: fps), fps: fps)
        }
    }

    /// The rates the link accepts; the daemon picks the divisor of the refresh inside the range
    /// nearest to `preferred`. `.default` means the display's maximum.
    public var preferredFrameRateRange: FrameRateRange {
        get { withState { $0.range } }
        set { setRange(newValue, fps: Int(newValue.preferred.rounded())) }
    }

    private func setRange(_ range: FrameRateRange, fps: Int) {
        withState { s in
            s.range = range
            s.preferredFramesPerSecond = fps
            if let id = s.subscriptionID { connection.setRange(id, range) }
        }
    }

    /// How long before its target vblank each frame's callback should run: the time the app
    /// needs to render and present. Zero (the default) runs the callback just after each vblank,
    /// as CADisplayLink does; above zero, vsyncd wakes the link at `targetTimestamp − workDuration`
    /// and `targetTimestamp` is the vblank to present at. It may exceed a frame (frames then
    /// overlap); at most one second. Needs vsyncd 0.3.0 or later; an older one ignores it.
    public var workDuration: Duration {
        get { .nanoseconds(Int64(withState { $0.workDurationNs })) }
        set {
            let (seconds, attoseconds) = max(newValue, .zero).components
            let ns = min(UInt64(seconds) &* 1_000_000_000 &+ UInt64(attoseconds / 1_000_000_000), WorkDuration.maximumNs)
            withState { s in
                guard s.workDurationNs != ns else { return }
                s.workDurationNs = ns
                if let id = s.subscriptionID { connection.setWorkDuration(id, ns) }
            }
        }
    }

    /// While the display is off (or its driver refuses vblank events), keep calling back at the
    /// last mode's rate with predicted frames (`Frame.flags` has `.predicted`). Off by default:
    /// the callbacks stop until the display is on.
    public var predictsWhileOff: Bool {
        get { withState { $0.predictsWhileOff } }
        set {
            withState { s in
                guard s.predictsWhileOff != newValue else { return }
                s.predictsWhileOff = newValue
                if let id = s.subscriptionID { connection.setPredictWhileOff(id, newValue) }
            }
        }
    }

    /// The current frame's target vblank sequence: the vblank `targetTimestamp` is the time of.
    public var targetSequence: UInt64 { withState { $0.current?.targetSequence ?? 0 } }

    /// The current frame's presentation candidates: the target, then up to three later vblanks
    /// at the link's rate. An app that needs longer than one frame aims at a later one.
    public var frameTimelines: FrameTimelines { withState { $0.current?.frameTimelines ?? FrameTimelines() } }

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

    // MARK: Subscription (called with the state locked)

    private func subscribeIfNeeded(_ s: inout State) {
        guard s.valid, s.hasTargets else { return }
        guard s.subscriptionID == nil else { return reportDelivery(&s) }
        s.reportedInlineQueue = s.inlineQueue
        s.subscriptionID = connection.register(
            self, selector: display, range: s.range, paused: s.paused,
            flags: s.predictsWhileOff ? .predictWhileOff : [], workDurationNs: s.workDurationNs,
            inlineQueue: s.reportedInlineQueue)
    }

    private func unsubscribeIfUnused(_ s: inout State) {
        guard !s.hasTargets else { return reportDelivery(&s) }
        guard let id = s.subscriptionID else { return }
        s.subscriptionID = nil
        s.reportedInlineQueue = nil
        connection.unregister(id)
    }

    /// Tells the connection when the link's contexts changed whether it may be run inline.
    private func reportDelivery(_ s: inout State) {
        guard let id = s.subscriptionID else { return }
        let queue = s.inlineQueue
        guard queue !== s.reportedInlineQueue else { return }
        s.reportedInlineQueue = queue
        connection.setInlineQueue(id, queue)
    }

    private func makeTimer(for runLoop: RunLoop) -> Timer {
        // Far-future and repeating: it only fires when a tick sets its fire date to now.
        let key = ObjectIdentifier(runLoop)
        return Timer(fire: .distantFuture, interval: 1e9, repeats: true) { [weak self] _ in
            self?.fire(on: key)
        }
    }

    // MARK: Delivery

    /// Runs on the run loop, in one of the link's modes.
    private func fire(on key: ObjectIdentifier) {
        let work = withState { s -> (Frame?, [Mailbox.Event], (@Sendable (DisplayLink) -> Void)?)? in
            guard s.valid, let i = s.runLoops.firstIndex(where: { ObjectIdentifier($0.runLoop) == key }) else { return nil }
            let (frame, events) = s.runLoops[i].mailbox.take()
            if let frame { s.current = frame }
            return (frame, events, s.handler)
        }
        run(work)
    }

    /// Runs on the link's dispatch queue: queued with `async`, or called by the reader thread
    /// inside `queue.sync` after an ``Handoff/inline`` handoff.
    func fireQueue() {
        let work = withState { s -> (Frame?, [Mailbox.Event], (@Sendable (DisplayLink) -> Void)?)? in
            guard s.valid else { return nil }
            let (frame, events) = s.queueMailbox.take()
            if let frame { s.current = frame }
            return (frame, events, s.handler)
        }
        run(work)
    }

    /// Runs the handler of a ``start()``ed link on the reader thread, after every link of the
    /// read has been handed its frame.
    func runDirectHandler() {
        let work = withState { s -> (Frame?, [Mailbox.Event], (@Sendable (DisplayLink) -> Void)?)? in
            guard s.valid, s.direct else { return nil }
            let (frame, events) = s.directMailbox.take()
            if let frame { s.current = frame }
            return (frame, events, s.handler)
        }
        run(work)
    }

    /// Calls the handlers for what a context's mailbox held, outside the lock.
    private func run(_ work: (Frame?, [Mailbox.Event], (@Sendable (DisplayLink) -> Void)?)?) {
        guard let (frame, events, handler) = work else { return }
        dispatch(events)
        if frame != nil { handler?(self) }
    }

    private func dispatch(_ events: [Mailbox.Event]) {
        guard !events.isEmpty else { return }
        let (onError, onChange) = withState { ($0.errorHandler, $0.displayChangeHandler) }
        for event in events {
            switch event {
            case .error(let error): onError?(error)
            case .change(let change): onChange?(change)
            }
        }
    }

    /// The wake-ups a mailbox put asks for, made after the lock is released.
    private struct Wakeups {
        var timers: [Timer] = []
        var queue: DispatchQueue?
        var streams: [FrameStream] = []
        var global = false
    }

    private func perform(_ w: Wakeups, frame: Frame? = nil) {
        if !w.timers.isEmpty {
            let now = Date()
            for timer in w.timers { timer.fireDate = now }
        }
        if let queue = w.queue { queue.async { self.fireQueue() } }
        if let frame { for stream in w.streams { stream.put(frame) } }
        if w.global { DispatchQueue.global().async { self.fireQueue() } }
    }

    /// What the reader thread must still do for a link after ``connectionDidDeliver(_:inlineOn:)``.
    enum Handoff {
        /// Nothing: the frame was posted to its contexts, or dropped.
        case none
        /// Call ``runDirectHandler()``: the link was ``start()``ed.
        case direct
        /// Call ``fireQueue()``: the reader thread is inside `sync` on the link's queue.
        case inline
    }

    /// A frame from the reader thread: the newest for this link in its read. `inlineQueue` is
    /// the queue the reader thread is running on inside `sync`, if any.
    func connectionDidDeliver(_ frame: Frame, inlineOn inlineQueue: DispatchQueue?) -> Handoff {
        var handoff = Handoff.none
        let wakeups = withState { s -> Wakeups? in
            guard s.valid, !s.paused else { return nil }
            s.displayIntervalNs = frame.durationNanoseconds
            var w = Wakeups()
            if s.direct {
                _ = s.directMailbox.put(frame)
                handoff = .direct
            }
            for i in s.runLoops.indices where s.runLoops[i].mailbox.put(frame) {
                w.timers.append(s.runLoops[i].timer)
            }
            if let queue = s.queue, s.queueMailbox.put(frame) || queue === inlineQueue {
                if queue === inlineQueue { handoff = .inline } else { w.queue = queue }
            }
            if !s.streams.isEmpty {
                w.streams = s.streams.values.compactMap(\.stream)
                if s.runLoops.isEmpty && s.queue == nil && !s.direct { s.current = frame }
            }
            return w
        }
        if let wakeups { perform(wakeups, frame: frame) }
        return handoff
    }

    func connectionDidSubscribe(_ answer: Subscribed) {
        if answer.isWaiting { return post(.change(.waiting)) }
        withState { s in
            s.refreshMillihertz = answer.display.refreshMillihertz
            s.displayIntervalNs = answer.displayIntervalNs
            s.syntheticDisplay = answer.display.flags.contains(.synthetic)
        }
    }

    func connectionDidReceive(_ event: DisplayEvent) {
        let change: DisplayChange
        switch event.kind {
        case .modeChanged:
            withState { s in
                s.refreshMillihertz = event.display.refreshMillihertz
                if event.display.periodNs > 0 { s.displayIntervalNs = event.display.periodNs }
            }
            change = .modeChanged(refreshHz: Double(event.display.refreshMillihertz) / 1000)
        case .off: change = .off
        case .on: change = .on
        case .added, .removed: return
        }
        post(.change(change))
    }

    func connectionDidFail(_ error: DisplayLinkError) { post(.error(error)) }

    /// Queues an error or display change in the mailbox of the link's first context.
    private func post(_ event: Mailbox.Event) {
        var direct = false
        let wakeups = withState { s -> Wakeups? in
            guard s.valid else { return nil }
            var w = Wakeups()
            if s.direct && s.runLoops.isEmpty {
                // post is only called on the reader thread: that is this link's context.
                direct = true
                return nil
            }
            if !s.runLoops.isEmpty {
                if s.runLoops[0].mailbox.post(event) { w.timers = [s.runLoops[0].timer] }
            } else if s.queueMailbox.post(event) {
                if let queue = s.queue { w.queue = queue } else { w.global = true }
            }
            return w
        }
        if direct { dispatch([event]) }
        if let wakeups { perform(wakeups) }
    }
}

/// The weak half of the target form.
///
/// `@unchecked Sendable`: `target` is a weak reference (loading it is thread-safe) and
/// `handler` is only called on the context the app scheduled the link on, the same confinement
/// `CADisplayLink` gives its target.
private final class WeakTarget<T: AnyObject>: @unchecked Sendable {
    weak var target: T?
    let handler: (T, DisplayLink) -> Void

    init(_ target: T, _ handler: @escaping (T, DisplayLink) -> Void) {
        self.target = target
        self.handler = handler
    }
}
