import CVsyncHang
import Dispatch
import Glibc
import Synchronization

/// The detector's thread: looks at every watched context each check interval (or at once
/// when a long delivery ends), reports hangs as they begin and as they end.
final class HangWatcher: Sendable {
    let signal: Int32
    let thresholdNs: UInt64
    private let intervalNs: UInt64
    private let captureTimeoutNs: Int64
    private let handler: @Sendable (HangDetector.Event) -> Void
    private let wakeup = DispatchSemaphore(value: 0)

    /// The state only the watcher's loop reads and writes after start, behind a lock so that
    /// `add`/`remove` from other threads are safe; never taken on a delivery's path.
    private struct State {
        var watches: [ObjectIdentifier: Watched] = [:]
        var stopped = false
        var nextID: UInt64 = 0
    }

    private struct Watched {
        let watch: HangWatch
        /// The hang reported and not yet ended.
        var current: HangDetector.Hang?
    }

    private let state = Mutex(State())

    init(configuration c: HangDetector.Configuration, signal: Int32, handler: @escaping @Sendable (HangDetector.Event) -> Void) {
        self.signal = signal
        thresholdNs = UInt64(max(c.threshold, 0.001) * 1e9)
        intervalNs = UInt64(max(c.checkInterval, 0.001) * 1e9)
        captureTimeoutNs = Int64(max(c.captureTimeout, 0.001) * 1e9)
        self.handler = handler
    }

    func add(_ watch: HangWatch) {
        state.withLock { $0.watches[ObjectIdentifier(watch)] = Watched(watch: watch) }
    }

    func remove(_ watch: HangWatch) {
        _ = state.withLock { $0.watches.removeValue(forKey: ObjectIdentifier(watch)) }
    }

    func wake() { wakeup.signal() }

    func stop() {
        state.withLock {
            $0.stopped = true
            $0.watches.removeAll()  // the watches hold the watcher: let both go
        }
        wakeup.signal()
    }

    func run() {
        // Symbol tables read now, not during the first hang: in a slow guest reading them took
        // long enough for a 300 ms hang to end before its report.
        vsync_hang_preload_symbols()
        // A rehearsal: this thread's own stack, taken by the same signal and named. Otherwise
        // the first hang's report is the first run of the unwinder, the symbol lookup and the
        // demangler, which in a slow guest (code paged in and translated on first use) took
        // much of the time a 300 ms hang leaves for its report.
        _ = vsync_hang_prepare_thread(signal)
        if case .success(let own)? = HangStack.capture(
            thread: pthread_self(), threadID: 0, signal: signal, timeoutNs: captureTimeoutNs, stillStuck: { true })
        {
            _ = own.description
        }
        while true {
            _ = wakeup.wait(timeout: .now() + .nanoseconds(Int(intervalNs)))
            let watches = state.withLock { s -> [HangWatch]? in s.stopped ? nil : s.watches.values.map(\.watch) }
            guard let watches else { return }
            for watch in watches { check(watch) }
        }
    }

    /// Where a context is stuck, if it is past the threshold.
    private func stuck(_ w: HangWatch, now: UInt64) -> (since: UInt64, kind: HangDetector.Hang.Kind)? {
        Self.stuck(
            entered: w.entered.load(ordering: .acquiring), left: w.left.load(ordering: .acquiring),
            pending: w.pending.load(ordering: .relaxed), now: now, thresholdNs: thresholdNs)
    }

    /// The same, from a heartbeat's stamps. A stamp newer than `now` is a delivery that began
    /// after the watcher read the clock (it was preempted in between): not a hang.
    static func stuck(entered: UInt64, left: UInt64, pending: UInt64, now: UInt64, thresholdNs: UInt64)
        -> (since: UInt64, kind: HangDetector.Hang.Kind)?
    {
        if entered != 0 && entered > left { return now > entered && now - entered >= thresholdNs ? (entered, .running) : nil }
        if pending != 0, now > pending, now - pending >= thresholdNs { return (pending, .waiting) }
        return nil
    }

    private func check(_ w: HangWatch) {
        let now = MonotonicClock.nanoseconds()
        let key = ObjectIdentifier(w)
        let current = state.withLock { $0.watches[key]?.current }
        let stuckNow = stuck(w, now: now)
        if let hang = current {
            if let s = stuckNow, s.since == hang.sinceNanoseconds, s.kind == hang.kind { return }  // still stuck
            state.withLock { $0.watches[key]?.current = nil }
            tell(w, .ended(hang, durationNanoseconds: length(of: hang, in: w, now: now)))
        }
        guard let s = stuckNow else { return }
        let hang = report(w, since: s.since, kind: s.kind, now: now)
        state.withLock { $0.watches[key]?.current = hang }
        tell(w, .began(hang))
    }

    /// The watch's observer first, so that an app's handler that reads the link's trace file
    /// finds the event written in it.
    private func tell(_ w: HangWatch, _ event: HangDetector.Event) {
        w.observer?(event)
        handler(event)
    }

    /// How long an ended hang lasted: exact from the context's record of its long delivery
    /// or wait; else (a record overwritten by a second long one) up to the end of the
    /// delivery, or to now.
    private func length(of hang: HangDetector.Hang, in w: HangWatch, now: UInt64) -> UInt64 {
        let start = w.longStart.load(ordering: .acquiring)
        if start == hang.sinceNanoseconds { return w.longEnd.load(ordering: .relaxed) &- start }
        let left = w.left.load(ordering: .acquiring)
        if hang.kind == .running, left > hang.sinceNanoseconds { return left - hang.sinceNanoseconds }
        return now &- hang.sinceNanoseconds
    }

    private func report(_ w: HangWatch, since: UInt64, kind: HangDetector.Hang.Kind, now: UInt64) -> HangDetector.Hang {
        let id = state.withLock { s -> UInt64 in
            s.nextID += 1
            return s.nextID
        }
        var stack: HangStack?
        var unavailable: String?
        let thread = w.thread.load(ordering: .relaxed)
        if kind == .waiting && !w.singleThread {
            unavailable = "the frame waits behind other work on the queue, on a thread that cannot be known"
        } else if thread == 0 {
            unavailable = "the context has not run yet, so its thread is not known"
        } else {
            // A context that moved on before the signal came gave the stack of what it ran
            // next, not of the hang.
            switch HangStack.capture(
                thread: pthread_t(thread), threadID: w.threadID.load(ordering: .relaxed),
                signal: signal, timeoutNs: captureTimeoutNs,
                stillStuck: { self.stuck(w, now: MonotonicClock.nanoseconds())?.since == since })
            {
            case .success(let s)?: stack = s
            case .failure(let f)?: unavailable = f.description
            case nil: unavailable = "the context moved on while its stack was being taken"
            }
        }
        return HangDetector.Hang(
            id: id, context: w.name, kind: kind, sinceNanoseconds: since,
            detectedNanoseconds: now, stack: stack, stackUnavailable: unavailable)
    }
}
