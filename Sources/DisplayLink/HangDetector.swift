import CVsyncHang
import Dispatch
import Foundation
import Synchronization

/// Reports a context (thread, dispatch queue or run loop) that stopped taking its frames,
/// while it is stuck, with the stuck thread's stack taken at that moment, then how long it
/// lasted once it moves again.
///
/// A watcher thread looks at each context's heartbeat every `checkInterval`: a delivery
/// entered and not left (`running`: the app's callback or work never returned), or a frame
/// put for the context that it has not begun (`waiting`: the context is busy elsewhere). Past
/// `threshold` it signals the stuck thread, whose handler copies its own backtrace into a
/// preallocated buffer; the watcher symbolizes it and reports `began`. A stack taken when the
/// hang is over, as a check at the next heartbeat would be, shows what ran after it, not what
/// hung; hence the signal, while the thread is still in the hung code.
///
/// The defaults are a run-loop hang monitor's: 250 ms stuck, looked at every 50 ms (five
/// 50 ms timeouts in a row).
public final class HangDetector: Sendable {
    public struct Configuration: Sendable {
        /// How long a context must be stuck to count as hung, in seconds.
        public var threshold: Double
        /// How often the watcher looks, in seconds: a hang is reported at most this late.
        public var checkInterval: Double
        /// The realtime signal that asks a thread for its stack (nil: SIGRTMIN + 5). The
        /// detector refuses a signal another handler owns.
        public var signal: Int32?
        /// How long to wait for the thread to answer, in seconds.
        public var captureTimeout: Double

        public init(threshold: Double = 0.25, checkInterval: Double = 0.05, signal: Int32? = nil, captureTimeout: Double = 0.1) {
            self.threshold = threshold
            self.checkInterval = checkInterval
            self.signal = signal
            self.captureTimeout = captureTimeout
        }
    }

    /// One hang.
    public struct Hang: Sendable, Equatable {
        public enum Kind: Sendable, Equatable {
            /// A delivery began and has not returned.
            case running
            /// A frame waits for a context busy with something else.
            case waiting
        }
        /// Unique within the detector; `ended` repeats its hang's.
        public let id: UInt64
        /// The watched context's name.
        public let context: String
        public let kind: Kind
        /// CLOCK_MONOTONIC ns: when the delivery began, or the frame was put.
        public let sinceNanoseconds: UInt64
        /// When the watcher saw it.
        public let detectedNanoseconds: UInt64
        /// The stuck thread's stack, taken while it was stuck.
        public let stack: HangStack?
        /// Why there is no stack, when there is none.
        public let stackUnavailable: String?
    }

    public enum Event: Sendable, Equatable {
        /// A context is stuck, still.
        case began(Hang)
        /// It moved again after `durationNanoseconds` stuck.
        case ended(Hang, durationNanoseconds: UInt64)
    }

    private let watcher: HangWatcher

    /// The signal used when the configuration names none: SIGRTMIN + 5.
    public static var defaultSignal: Int32 { vsync_hang_default_signal() }

    /// Starts the watcher. `handler` runs on the watcher's thread: it should return quickly.
    public init(configuration: Configuration = Configuration(), handler: @escaping @Sendable (Event) -> Void) throws(HangDetectorError) {
        let signal = configuration.signal ?? Self.defaultSignal
        let installed = vsync_hang_install(signal)
        guard installed == 0 else { throw HangDetectorError(signal: signal, errno: -installed) }
        watcher = HangWatcher(configuration: configuration, signal: signal, handler: handler)
        let thread = Thread { [watcher] in watcher.run() }
        thread.name = "vsync hang watcher"
        thread.start()
    }

    /// A detector whose events come as a stream.
    public static func events(configuration: Configuration = Configuration()) throws(HangDetectorError) -> (
        HangDetector, AsyncStream<Event>
    ) {
        let (stream, continuation) = AsyncStream<Event>.makeStream(bufferingPolicy: .bufferingNewest(64))
        let detector = try HangDetector(configuration: configuration) { continuation.yield($0) }
        return (detector, stream)
    }

    deinit { watcher.stop() }

    /// Starts watching a context. `singleThread`: the context always runs on one thread (a
    /// thread or a run loop), so a frame waiting for it can be blamed on that thread's stack;
    /// a queue's frame waits behind work on a thread that cannot be known.
    public func watch(_ name: String, singleThread: Bool) -> HangWatch { watch(name, singleThread: singleThread, observer: nil) }

    /// A watch whose events also go to `observer` (on the watcher's thread, before the
    /// detector's handler): how a link's trace file hears of its own context's hangs.
    func watch(_ name: String, singleThread: Bool, observer: (@Sendable (Event) -> Void)?) -> HangWatch {
        let watch = HangWatch(name: name, singleThread: singleThread, watcher: watcher, observer: observer)
        watcher.add(watch)
        return watch
    }

    /// Stops watching a context (a hang it is in ends unreported).
    public func unwatch(_ watch: HangWatch) { watcher.remove(watch) }

    /// Stops the watcher for good.
    public func stop() { watcher.stop() }
}

/// The detector could not take its signal.
public struct HangDetectorError: Error, Sendable, CustomStringConvertible {
    public let signal: Int32
    public let errno: Int32
    public var description: String {
        switch errno {
        case EBUSY: "hang detector: signal \(signal) already has another handler: pass a free realtime signal in Configuration.signal"
        case EEXIST:
            "hang detector: signal \(signal) requested, but this process's detectors already use \(vsync_hang_installed_signal()): use that one"
        default: "hang detector: cannot install a handler for signal \(signal): \(String(cString: strerror(errno)))"
        }
    }
}

/// One watched context's heartbeat, stamped by the context itself: lock-free atomics only,
/// since it is on every delivery's path.
public final class HangWatch: Sendable {
    public let name: String
    let singleThread: Bool
    private let watcher: HangWatcher
    /// Told of this watch's events before the detector's handler (set once, at creation).
    let observer: (@Sendable (HangDetector.Event) -> Void)?
    let entered = Atomic<UInt64>(0)
    let left = Atomic<UInt64>(0)
    let pending = Atomic<UInt64>(0)
    let thread = Atomic<UInt>(0)
    let threadID = Atomic<Int32>(0)
    /// The newest delivery (or wait) that lasted past the threshold, so the watcher gets its
    /// exact length even if later deliveries overwrote `left` before it looked.
    let longStart = Atomic<UInt64>(0)
    let longEnd = Atomic<UInt64>(0)

    init(name: String, singleThread: Bool, watcher: HangWatcher, observer: (@Sendable (HangDetector.Event) -> Void)? = nil) {
        self.name = name
        self.singleThread = singleThread
        self.watcher = watcher
        self.observer = observer
    }

    /// A delivery begins on the calling thread.
    public func willRun() { willRun(now: MonotonicClock.nanoseconds()) }

    /// A delivery begins on the calling thread at `now` (CLOCK_MONOTONIC ns), for a caller
    /// that has read the clock already.
    public func willRun(now: UInt64) {
        let tid = vsync_hang_prepare_thread(watcher.signal)
        let waitedSince = pending.exchange(0, ordering: .relaxed)
        if waitedSince != 0, now &- waitedSince >= watcher.thresholdNs { noteLong(waitedSince, now) }
        thread.store(UInt(pthread_self()), ordering: .relaxed)
        threadID.store(tid, ordering: .relaxed)
        entered.store(now, ordering: .releasing)
    }

    /// The delivery returned.
    public func didRun() { didRun(now: MonotonicClock.nanoseconds()) }

    public func didRun(now: UInt64) {
        let began = entered.load(ordering: .relaxed)
        left.store(max(now, began &+ 1), ordering: .releasing)
        if now &- began >= watcher.thresholdNs { noteLong(began, now) }
    }

    /// A frame was put for the context; the oldest one not yet run is the one that counts.
    public func framePut() { framePut(now: MonotonicClock.nanoseconds()) }

    public func framePut(now: UInt64) {
        _ = pending.compareExchange(expected: 0, desired: now, ordering: .relaxed)
    }

    /// The frames put for the context were dropped before it ran them (the link paused): it
    /// no longer owes a frame, so it is not waiting.
    public func framesDropped() { pending.store(0, ordering: .relaxed) }

    private func noteLong(_ start: UInt64, _ end: UInt64) {
        longEnd.store(end, ordering: .relaxed)
        longStart.store(start, ordering: .releasing)
        watcher.wake()
    }
}
