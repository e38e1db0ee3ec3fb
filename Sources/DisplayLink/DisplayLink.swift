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
/// for the frame being prepared), ``duration`` the display's frame interval. Inside a callback
/// every frame property reads the frame that callback was called for, whatever the other
/// contexts of the link are doing; outside one, read ``currentFrame`` once to get a consistent set.
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
/// All properties are thread-safe. The link's parts, one concern a file: scheduling
/// (`DisplayLink+Scheduling`), properties (`+Properties`), the settings and the subscription
/// that owns them (`+Subscription`), delivery to the contexts (`+Delivery`, `DeliveryContexts`).
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

    let connection: DisplayLinkConnection
    private let state: Mutex<State>
    /// How many times the link was paused while subscribed. The reader thread reads it when the
    /// core hands it a frame (under the core's lock) and again when it gives the frame to the link
    /// (under the link's): a frame is dropped if the count moved in between, so a pause always
    /// stops the frames read before it without the core's lock on every frame.
    let pauses = Atomic<UInt32>(0)

    struct State {
        var handler: (@Sendable (DisplayLink) -> Void)?
        var errorHandler: (@Sendable (DisplayLinkError) -> Void)?
        var displayChangeHandler: (@Sendable (DisplayChange) -> Void)?
        var valid = true
        /// Who holds the settings: the link while it has no subscription, the client core while
        /// it has one (see `DisplayLink+Subscription`).
        var subscription = Subscription.none(Settings())
        /// The newest frame a context of the link took: what the frame properties read outside
        /// a callback (inside one, they read the callback's own frame).
        var lastFrame: Frame?
        /// The run loops, queue, reader thread and streams the link is delivered on.
        var contexts = DeliveryContexts()
        /// Told once when the link is invalidated (frame work waiting for its frames).
        var invalidationHandlers: [@Sendable () -> Void] = []
        /// The hang detector's heartbeat of the link's context (``detectHangs(with:name:)``).
        var hangWatch: (watch: HangWatch, detector: HangDetector)?
        /// Told of each hang of the link's context before the detector's handler: its
        /// ``FrameMonitor`` writes them to its trace. Given to each watch when it is made.
        var hangObserver: (@Sendable (HangDetector.Event) -> Void)?
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
    func withState<R>(_ body: (inout State) -> R) -> R {
        assert(!connection.isCoreLockedByCurrentThread, "lock order: a link's lock is taken before the connection's, never inside it")
        return state.withLock { body(&$0) }
    }

    /// False once ``invalidate()`` was called (or the target of a target-form link went away).
    public var isValid: Bool { withState { $0.valid } }

    /// Stops the link for good: unsubscribes, removes it from every run loop mode and queue,
    /// ends its streams and releases the handlers. Thread-safe and idempotent.
    public func invalidate() {
        let (timers, streams, told) = withState { s -> ([Timer], [FrameStream], [@Sendable () -> Void]) in
            guard s.valid else { return ([], [], []) }
            s.valid = false
            s.handler = nil
            s.errorHandler = nil
            s.displayChangeHandler = nil
            let removed = s.contexts.removeAll()
            endSubscription(&s)
            defer { s.invalidationHandlers = [] }
            return (removed.0, removed.1, s.invalidationHandlers)
        }
        for timer in timers { timer.invalidate() }
        for stream in streams { stream.finish() }
        for handler in told { handler() }
    }

    /// Calls `handler` once when the link is invalidated (at once, if it already is), with no
    /// lock held.
    func whenInvalidated(_ handler: @escaping @Sendable () -> Void) {
        let now = withState { s -> Bool in
            guard s.valid else { return true }
            s.invalidationHandlers.append(handler)
            return false
        }
        if now { handler() }
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
