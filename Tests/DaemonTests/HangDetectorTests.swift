import Dispatch
import Foundation
import Synchronization
import Testing

@testable import DisplayLink

/// Hangs on purpose in a known function, and where that function's name must show up: in the
/// stack the detector took from the stuck thread, reported before the hang ended. Order is
/// proven by one log that both the hung code and the detector's handler append to, not by
/// timing. The threshold is 100 ms (checked every 20 ms) so that the 300 ms hang leaves the
/// detector 200 ms to see it and take the stack on a loaded machine; the defaults' own test
/// checks the 250 ms / 50 ms numbers.
@Suite("Hang detector", .serialized)
struct HangDetectorTests {
    static let hangMs: UInt64 = 300
    static let configuration = HangDetector.Configuration(threshold: 0.1, checkInterval: 0.02)

    enum Entry: Sendable, Equatable {
        case began(HangDetector.Hang)
        case ended(HangDetector.Hang, UInt64)
        case hangReturned(startNs: UInt64, endNs: UInt64)
    }

    /// The log, and semaphores signalled on every `began` and `ended`.
    final class Log: Sendable {
        let entries = Mutex<[Entry]>([])
        let began = DispatchSemaphore(value: 0)
        let ended = DispatchSemaphore(value: 0)
        func append(_ e: Entry) {
            entries.withLock { $0.append(e) }
            if case .began = e { began.signal() }
            if case .ended = e { ended.signal() }
        }
        func handler(_ event: HangDetector.Event) {
            switch event {
            case .began(let h): append(.began(h))
            case .ended(let h, let d): append(.ended(h, d))
            }
        }
        /// Waits for the `n`th ended event (an event, not a time: the timeout only stops a
        /// broken detector from hanging the suite).
        func waitForEnded() -> Bool { ended.wait(timeout: .now() + 10) == .success }
        /// Waits for the end of hang `id`; its length.
        func waitForEnded(of id: UInt64) -> UInt64? {
            while true {
                for case .ended(let h, let ns) in entries.withLock({ $0 }) where h.id == id { return ns }
                guard ended.wait(timeout: .now() + 10) == .success else { return nil }
            }
        }
        /// Waits for a `began` event that `matches`, among those logged so far and the next
        /// ones (the timeout, again, only stops a broken detector from hanging the suite).
        func waitForBegan(_ matches: (HangDetector.Hang) -> Bool) -> HangDetector.Hang? {
            while true {
                for case .began(let h) in entries.withLock({ $0 }) where matches(h) { return h }
                guard began.wait(timeout: .now() + 10) == .success else { return nil }
            }
        }
    }

    /// Checks one running hang's log: began (with the function in its stack) before the hung
    /// code returned, then ended with the hang's length.
    func expectReportedWhileItHung(_ log: Log, context: String) throws {
        let entries = log.entries.withLock { $0 }
        let beganAt = try #require(entries.firstIndex { if case .began = $0 { true } else { false } }, "no hang reported")
        let returnedAt = try #require(entries.firstIndex { if case .hangReturned = $0 { true } else { false } })
        #expect(beganAt < returnedAt, "the hang was reported only after it ended")
        guard case .began(let hang) = entries[beganAt], case .hangReturned(let start, let end) = entries[returnedAt] else { return }
        #expect(hang.context == context && hang.kind == .running)
        let stack = try #require(hang.stack, "no stack: \(hang.stackUnavailable ?? "")")
        // Demangled: the runtime's demangler turned `$s11DaemonTests28simulatedHang…` into Swift.
        #expect(stack.contains(function: "simulatedHangInKnownFunction(milliseconds:"), "stack:\n\(stack)")
        #expect(stack.threadID > 0)
        #expect(hang.sinceNanoseconds == start && hang.detectedNanoseconds < end)
        let endedEntry = try #require(entries.first { if case .ended = $0 { true } else { false } })
        guard case .ended(let endedHang, let duration) = endedEntry else { return }
        #expect(endedHang.id == hang.id)
        // Exactly the delivery's length, from willRun to didRun around the hung call.
        #expect(duration == end - start)
        #expect(end - start >= Self.hangMs * 1_000_000)
    }

    @Test func aHungThreadIsReportedWithItsStackWhileItHangs() throws {
        let log = Log()
        let detector = try HangDetector(configuration: Self.configuration) { log.handler($0) }
        defer { detector.stop() }
        let watch = detector.watch("test thread", singleThread: true)
        let thread = Thread {
            let start = MonotonicClock.nanoseconds()
            watch.willRun(now: start)
            _ = simulatedHangInKnownFunction(milliseconds: Self.hangMs)
            let end = MonotonicClock.nanoseconds()
            log.append(.hangReturned(startNs: start, endNs: end))
            watch.didRun(now: end)
        }
        thread.start()
        #expect(log.waitForEnded(), "the hang never ended in the detector's eyes")
        try expectReportedWhileItHung(log, context: "test thread")
    }

    @Test func aHungDispatchQueueIsReportedWithItsStackWhileItHangs() throws {
        let log = Log()
        let detector = try HangDetector(configuration: Self.configuration) { log.handler($0) }
        defer { detector.stop() }
        // Dispatch's worker threads block asynchronous signals; willRun lets its thread take ours.
        let watch = detector.watch("test queue", singleThread: false)
        DispatchQueue(label: "hang test").async {
            let start = MonotonicClock.nanoseconds()
            watch.willRun(now: start)
            _ = simulatedHangInKnownFunction(milliseconds: Self.hangMs)
            let end = MonotonicClock.nanoseconds()
            log.append(.hangReturned(startNs: start, endNs: end))
            watch.didRun(now: end)
        }
        #expect(log.waitForEnded(), "the hang never ended in the detector's eyes")
        try expectReportedWhileItHung(log, context: "test queue")
    }

    @Test func aFrameWaitingForABusyThreadIsAWaitingHangWithThatThreadsStack() throws {
        let log = Log()
        let detector = try HangDetector(configuration: Self.configuration) { log.handler($0) }
        defer { detector.stop() }
        let watch = detector.watch("busy thread", singleThread: true)
        let thread = Thread {
            // One short delivery makes the thread known; then a frame comes while the thread
            // is stuck outside any delivery, and runs once it is free.
            watch.willRun()
            watch.didRun()
            watch.framePut()
            let (start, end) = simulatedHangInKnownFunction(milliseconds: Self.hangMs)
            log.append(.hangReturned(startNs: start, endNs: end))
            watch.willRun()
            watch.didRun()
        }
        thread.start()
        #expect(log.waitForEnded())
        let entries = log.entries.withLock { $0 }
        #expect(entries.count == 3, "\(entries)")
        guard entries.count == 3, case .began(let hang) = entries[0], case .hangReturned(let start, let end) = entries[1],
            case .ended(let endedHang, let duration) = entries[2]
        else { return }
        #expect(hang.kind == .waiting && endedHang.id == hang.id)
        #expect(
            hang.stack?.contains(function: "simulatedHangInKnownFunction") == true,
            "\(hang.stack?.description ?? hang.stackUnavailable ?? "")")
        // The wait ran from the put (before the hang began) to the next willRun (after it).
        #expect(duration >= end - start)
    }

    @Test func aQueuesWaitingFrameIsReportedWithoutAStackItCannotKnow() throws {
        let log = Log()
        let detector = try HangDetector(configuration: Self.configuration) { log.handler($0) }
        defer { detector.stop() }
        let watch = detector.watch("blocked queue", singleThread: false)
        let queue = DispatchQueue(label: "blocked")
        queue.async {
            // Work that is not a delivery blocks the queue; the frame put meanwhile waits.
            watch.framePut()
            let (start, end) = simulatedHangInKnownFunction(milliseconds: Self.hangMs)
            log.append(.hangReturned(startNs: start, endNs: end))
        }
        queue.async {
            watch.willRun()
            watch.didRun()
        }
        #expect(log.waitForEnded())
        let entries = log.entries.withLock { $0 }
        guard case .began(let hang)? = entries.first else {
            Issue.record("no hang reported: \(entries)")
            return
        }
        #expect(hang.kind == .waiting && hang.stack == nil)
        #expect(hang.stackUnavailable?.contains("queue") == true)
        #expect(
            entries.firstIndex { if case .began = $0 { true } else { false } }! < entries.firstIndex {
                if case .hangReturned = $0 { true } else { false }
            }!)
    }

    @Test func shortDeliveriesAreNotHangs() throws {
        let log = Log()
        let detector = try HangDetector(configuration: Self.configuration) { log.handler($0) }
        defer { detector.stop() }
        let watch = detector.watch("quick", singleThread: true)
        let entered = Mutex<UInt64>(0)
        let thread = Thread {
            // Many deliveries well under the threshold, then one hang: the only one reported.
            for _ in 0..<50 {
                watch.willRun()
                watch.didRun()
            }
            let now = MonotonicClock.nanoseconds()
            entered.withLock { $0 = now }
            watch.willRun(now: now)
            let (start, end) = simulatedHangInKnownFunction(milliseconds: Self.hangMs)
            log.append(.hangReturned(startNs: start, endNs: end))
            watch.didRun()
        }
        thread.start()
        #expect(log.waitForEnded())
        let began = log.entries.withLock { $0 }.compactMap { if case .began(let h) = $0 { h } else { nil } }
        #expect(began.count == 1 && began.first?.sinceNanoseconds == entered.withLock { $0 })
    }

    /// The watcher reads the clock, then the stamps: a delivery that began in between has a
    /// stamp newer than the watcher's `now`, which must not read as a hang of (almost) 2^64 ns.
    @Test func aDeliveryNewerThanTheWatchersClockIsNotAHang() {
        let threshold: UInt64 = 50_000_000
        let now: UInt64 = 10_000_000_000
        #expect(HangWatcher.stuck(entered: now + 1_000, left: now - 5, pending: 0, now: now, thresholdNs: threshold) == nil)
        #expect(HangWatcher.stuck(entered: 0, left: 0, pending: now + 1_000, now: now, thresholdNs: threshold) == nil)
        // And the ones that are: in one delivery, or owed one, past the threshold.
        let running = HangWatcher.stuck(entered: now - threshold, left: now - threshold - 5, pending: 0, now: now, thresholdNs: threshold)
        #expect(running?.since == now - threshold && running?.kind == .running)
        let waiting = HangWatcher.stuck(entered: 7, left: 9, pending: now - threshold - 1, now: now, thresholdNs: threshold)
        #expect(waiting?.since == now - threshold - 1 && waiting?.kind == .waiting)
        #expect(HangWatcher.stuck(entered: now - threshold + 1, left: 0, pending: 0, now: now, thresholdNs: threshold) == nil)
    }

    @Test func defaultsAreTwoHundredFiftyMillisecondsCheckedEveryFifty() {
        let c = HangDetector.Configuration()
        #expect(c.threshold == 0.25 && c.checkInterval == 0.05 && c.signal == nil)
        #expect(HangDetector.defaultSignal > SIGUSR2)
    }

    @Test func aSignalSomeoneElseHandlesIsRefused() throws {
        let signal = HangDetector.defaultSignal + 4
        var action = sigaction()
        action.__sigaction_handler.sa_handler = { _ in }
        sigemptyset(&action.sa_mask)
        var old = sigaction()
        #expect(sigaction(signal, &action, &old) == 0)
        defer { _ = sigaction(signal, &old, nil) }
        do {
            _ = try HangDetector(configuration: .init(signal: signal)) { _ in }
            Issue.record("took a signal with another handler")
        } catch {
            #expect(error.errno == EBUSY, "\(error)")
        }
    }

    @Test func oneSignalPerProcess() throws {
        let first = try HangDetector { _ in }
        defer { first.stop() }
        do {
            _ = try HangDetector(configuration: .init(signal: HangDetector.defaultSignal + 6)) { _ in }
            Issue.record("a second signal was installed")
        } catch {
            #expect(error.errno == EEXIST, "\(error)")
        }
    }
}

/// Hangs the calling thread for `milliseconds`, sleeping in short steps (the stack signal cuts
/// a sleep short). Not inlined, so it is a frame of its own in the stack. Returns when it
/// started and ended.
@inline(never)
func simulatedHangInKnownFunction(milliseconds: UInt64) -> (UInt64, UInt64) {
    let start = MonotonicClock.nanoseconds()
    while MonotonicClock.nanoseconds() - start < milliseconds * 1_000_000 { usleep(1000) }
    return (start, MonotonicClock.nanoseconds())
}
