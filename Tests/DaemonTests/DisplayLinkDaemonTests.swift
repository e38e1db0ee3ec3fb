@testable import DisplayLink
import Foundation
import Glibc
import Synchronization
import Testing
import VsyncCore

/// DisplayLink against the REAL vsyncd (`--source timer:60` on a temp socket), and
/// `vsync-probe follow` against it.
extension DisplayLinkTests {
    @Suite
    struct Daemon {
        /// Timestamps of a 60 Hz timer source: the period is 1/60 s rounded to whole ns.
        static let toleranceNs: UInt64 = 2

        /// Whether this thread is DisplayLink's reader thread, by the name the kernel knows it by.
        /// The names of this process's threads (diagnostics).
        static func threadNames() -> [String: Int] {
            let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
            let names = tasks.compactMap { try? String(contentsOfFile: "/proc/self/task/\($0)/comm", encoding: .utf8) }
            return Dictionary(grouping: names.map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }, by: { $0 }).mapValues(\.count)
        }

        static func onReaderThread() -> Bool {
            (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) == "DisplayLink\n"
        }

        static func close(_ a: UInt64, _ b: UInt64, within tolerance: UInt64 = toleranceNs) -> Bool {
            (a > b ? a - b : b - a) <= tolerance
        }

        @Test func thirtyFramesPerSecondOnASixtyHertzDisplay() async throws {
            let daemon = try DaemonProcess(hertz: 60, logLevel: "warning")
            defer { daemon.stop() }
            let recorder = LinkRecorder()
            let link = DisplayLink(socketPath: daemon.socketPath, handler: recorder.handler())
            link.preferredFramesPerSecond = 30
            #expect(link.preferredFramesPerSecond == 30)
            link.start(on: DispatchQueue(label: "thirty"))
            #expect(await eventually(timeout: 2) { recorder.count >= 1 })
            let started = recorder.count
            let firstSequence = try #require(recorder.all.last).frame.sequence
            // Two seconds of vblanks, by the display's own sequence.
            #expect(await eventually(timeout: 5) { (recorder.all.last?.frame.sequence ?? 0) >= firstSequence + 120 })
            link.invalidate()
            let samples = Array(recorder.all.dropFirst(started))
            // 2 s at 30 Hz is about 60 due ticks. Counted from the ticks' own sequence numbers
            // rather than the wall clock, so a loaded machine oversleeping can't skew it: every
            // due tick between the first and last was delivered or reported as skipped.
            let first = try #require(samples.first), last = try #require(samples.last)
            let due = Int((last.frame.sequence - first.frame.sequence) / 2) + 1
            let skipped = samples.dropFirst().reduce(0) { $0 + Int($1.frame.skipped) }
            #expect(samples.count + skipped == due, "\(samples.count) delivered + \(skipped) skipped vs \(due) due")
            #expect(due >= 50 && samples.count >= due * 3 / 4, "\(samples.count) of \(due) due ticks delivered in 2 s")
            #expect(link.maximumFramesPerSecond == 60)
            #expect(link.isSynthetic)
            let period = samples[0].frame.durationNanoseconds
            #expect(Self.close(period, 16_666_667, within: 1))
            for s in samples {
                #expect(s.frame.sequence % 2 == 0, "a 30 Hz link ticks on even vblanks")
                #expect(Self.close(s.frame.targetTimestampNanoseconds - s.frame.timestampNanoseconds, 2 * period))
                #expect(s.frame.durationNanoseconds == period)
                #expect(abs(s.duration - 1.0 / 60) < 1e-6)
                #expect(s.frame.flags.contains(.synthetic))
            }
            for (a, b) in zip(samples, samples.dropFirst()) where b.frame.skipped == 0 {
                #expect(b.frame.sequence - a.frame.sequence == 2)
                #expect(Self.close(b.frame.timestampNanoseconds - a.frame.timestampNanoseconds, 2 * period, within: 10))
                // The target of one frame is the timestamp of the next.
                #expect(Self.close(a.frame.targetTimestampNanoseconds, b.frame.timestampNanoseconds, within: 10))
            }
            // Callbacks come shortly after their vblank.
            let ages = samples.map { Double($0.calledNs - $0.frame.timestampNanoseconds) / 1e6 }.sorted()
            #expect(ages[ages.count / 2] < 8, "median callback age \(ages[ages.count / 2]) ms")
        }

        /// `start()`: the handler runs on the library's reader thread; a slow handler there skips
        /// frames (counted in `skipped`) instead of queueing them.
        @Test func directDeliveryOnTheReaderThreadSkipsRatherThanQueues() async throws {
            let daemon = try DaemonProcess(hertz: 60, logLevel: "warning")
            defer { daemon.stop() }
            let recorder = LinkRecorder()
            // Callbacks 11–25 take 100 ms each (simulated work): three frames at 30 Hz.
            let slow = 11...25
            let link = DisplayLink(socketPath: daemon.socketPath) { link in
                recorder.record(link)
                if slow.contains(recorder.count) { usleep(100_000) }
            }
            link.preferredFramesPerSecond = 30
            link.start()
            #expect(await eventually(timeout: 6) { recorder.count >= 35 })
            link.invalidate()
            let samples = recorder.all
            // Too few frames already failed above; the checks below index up to the slow spell's end.
            try #require(samples.count > slow.upperBound, "only \(samples.count) frames")
            #expect(samples.allSatisfy { $0.frame.sequence % 2 == 0 })
            // While slow, the frame after each slow callback skipped at least one: the reader was
            // held 100 ms, in which the ticks 33 and 67 ms after the slow one's came (34 ms of
            // slack for a late daemon), and only the newest was delivered, the other counted.
            for i in slow.dropLast() {
                #expect(samples[i].frame.skipped >= 1, "callback \(i + 1) after a 100 ms one skipped \(samples[i].frame.skipped)")
            }
            for (a, b) in zip(samples, samples.dropFirst()) {
                #expect((b.frame.sequence - a.frame.sequence) / 2 - 1 == UInt64(b.frame.skipped))
            }
            // After the slow spell the frames are fresh again, not a backlog.
            let last = try #require(samples.last)
            #expect(last.calledNs - last.frame.timestampNanoseconds < 50_000_000)
        }

        /// One link's callbacks: (on the queue, on the reader thread, sequence, skipped).
        final class InlineProbe: Sendable {
            typealias Call = (onQueue: Bool, onReader: Bool, sequence: UInt64, skipped: Int)
            let queue: DispatchQueue
            private let key = DispatchSpecificKey<Int>()
            private let calls = Mutex<[Call]>([])
            /// Calls made so far, read on the queue by work queued on it (no race with callbacks).
            private let marks = Mutex<[Int]>([])
            let errors = Mutex<[DisplayLinkError]>([])

            init(label: String) {
                queue = DispatchQueue(label: label)
                queue.setSpecific(key: key, value: 1)
            }

            func link(socketPath: String) -> DisplayLink {
                let link = DisplayLink(socketPath: socketPath) { [self] link in
                    let frame = link.currentFrame!
                    let call = (DispatchQueue.getSpecific(key: key) == 1, Daemon.onReaderThread(), frame.sequence, frame.skipped)
                    calls.withLock { $0.append(call) }
                }
                link.errorHandler = { [self] error in errors.withLock { $0.append(error) } }
                return link
            }

            /// The next `n` callbacks (waiting up to 3 s; a timeout is an issue), with how many
            /// of them ran off the queue and how many on the reader thread.
            func next(_ n: Int, after mark: Int? = nil, sourceLocation: SourceLocation = #_sourceLocation) async -> (calls: [Call], offQueue: Int, onReader: Int) {
                let mark = mark ?? calls.withLock { $0.count }
                await expectEventually("\(n) callbacks", timeout: 3, sourceLocation: sourceLocation) { calls.withLock { $0.count } >= mark + n }
                let new = calls.withLock { Array($0[min(mark, $0.count)...].prefix(n)) }
                return (new, new.filter { !$0.onQueue }.count, new.filter(\.onReader).count)
            }

            /// Keeps the queue busy for `ms` (simulated work) and returns, once it is done, how
            /// many callbacks ran before it: the callbacks after that index came after the spell.
            func busy(ms: UInt32) async -> Int {
                await withCheckedContinuation { (c: CheckedContinuation<Int, Never>) in
                    queue.async { [self] in
                        usleep(ms * 1000)
                        c.resume(returning: calls.withLock { $0.count })
                    }
                }
            }
        }

        /// `start(on:)` with the queue as every link's one context: the reader thread runs the
        /// handler inside `queue.sync` (one wake-up a tick), still on the queue. A busy queue
        /// skips frames; one that keeps the reader waiting over 250 ms goes back to `async`.
        @Test func queueDeliveryRunsInlineWhileTheQueueIsTheOnlyContext() async throws {
            let daemon = try DaemonProcess(hertz: 60, logLevel: "warning")
            defer { daemon.stop() }
            let probe = InlineProbe(label: "inline")
            let link = probe.link(socketPath: daemon.socketPath)
            link.start(on: probe.queue)
            let alone = await probe.next(10)
            #expect(alone.calls.count >= 10)
            #expect(alone.offQueue == 0)
            #expect(alone.onReader == alone.calls.count,
                    "\(alone.onReader) of \(alone.calls.count) inline; \(DisplayLinkConnection.shared(socketPath: daemon.socketPath).inlineStatus); threads \(Daemon.threadNames())")

            // Busy for 150 ms: the ticks of those frames come as one callback with the rest
            // skipped, and delivery stays inline.
            let busy = await probe.next(5, after: await probe.busy(ms: 150))
            let first = try #require(busy.calls.first)
            #expect(first.skipped >= 5, "first callback after 150 ms busy skipped \(first.skipped)")
            for (a, b) in zip(busy.calls, busy.calls.dropFirst()) { #expect(b.sequence - a.sequence - 1 == UInt64(b.skipped)) }
            #expect(busy.onReader == busy.calls.count, "\(busy.onReader) of \(busy.calls.count) inline after a short busy spell")

            // Busy for 400 ms: over the limit, so the link goes back to async, still on its queue.
            // The callback that waited for the spell still ran inline; every one after it is async.
            let spell = await probe.busy(ms: 400)
            let after = await probe.next(10, after: spell + 1)
            #expect(after.calls.count >= 10)
            #expect(after.offQueue == 0)
            #expect(after.onReader == 0, "\(after.onReader) of \(after.calls.count) still inline after a 400 ms wait")
            #expect(probe.errors.withLock { $0.isEmpty })
            link.invalidate()
        }

        /// A second link on another queue: both are posted to with `async`; alone again, inline again.
        @Test func queueDeliveryIsAsyncWithLinksOnTwoQueues() async throws {
            let daemon = try DaemonProcess(hertz: 60, logLevel: "warning")
            defer { daemon.stop() }
            let probe = InlineProbe(label: "first")
            let link = probe.link(socketPath: daemon.socketPath)
            link.start(on: probe.queue)
            let first = await probe.next(5)
            let connection = DisplayLinkConnection.shared(socketPath: daemon.socketPath)
            #expect(first.onReader == first.calls.count, "\(first.onReader) of \(first.calls.count) inline alone; \(connection.inlineStatus)")
            let other = DisplayLink(socketPath: daemon.socketPath) { _ in }
            other.start(on: DispatchQueue(label: "other"))
            // The change is decided as start(on:) returns; a read already under way may still
            // deliver inline once, so the first callback after it is left out.
            let shared = await probe.next(10, after: await probe.busy(ms: 0) + 1)
            #expect(shared.calls.count >= 10)
            #expect(shared.offQueue == 0)
            #expect(shared.onReader == 0, "\(shared.onReader) of \(shared.calls.count) still inline")
            other.invalidate()
            // As above: one read under way may still post with async.
            let alone = await probe.next(10, after: await probe.busy(ms: 0) + 1)
            #expect(alone.calls.count >= 10)
            #expect(alone.onReader == alone.calls.count, "\(alone.onReader) of \(alone.calls.count) inline once alone again; \(connection.inlineStatus)")
            link.invalidate()
        }

        @Test func rateRangeAndLiveRateChange() async throws {
            let daemon = try DaemonProcess(hertz: 60, logLevel: "warning")
            defer { daemon.stop() }
            let recorder = LinkRecorder()
            let link = DisplayLink(socketPath: daemon.socketPath, handler: recorder.handler())
            link.preferredFrameRateRange = try FrameRateRangeForTests.make(10, 25, 20)
            link.start(on: DispatchQueue(label: "range"))
            #expect(await eventually(timeout: 1.5) { recorder.count >= 5 })
            let interval = { (s: LinkSample) in s.frame.targetTimestampNanoseconds - s.frame.timestampNanoseconds }
            let first = try #require(recorder.all.first, "no frame at 20 Hz")
            let period = first.frame.durationNanoseconds
            #expect(Self.close(interval(recorder.all.last!), 3 * period), "20 Hz in 10…25 on 60 Hz: every third vblank")
            link.preferredFramesPerSecond = 0
            #expect(await eventually(timeout: 1) { recorder.all.last.map { Self.close(interval($0), period) } ?? false })
            link.invalidate()
        }

        @Test func runLoopDeliveryAndSlowHandler() async throws {
            let daemon = try DaemonProcess(hertz: 60, logLevel: "warning")
            defer { daemon.stop() }
            let recorder = LinkRecorder()
            let calls = Atomic<Int>(0)
            let link = DisplayLink(socketPath: daemon.socketPath) { link in
                recorder.record(link)
                let n = calls.add(1, ordering: .relaxed).newValue
                if n >= 20 && n < 23 { usleep(100_000) }  // calls 20–22 (samples 19–21) take six frames
            }
            let thread = RunLoopThread(setup: { link.add(to: $0, forMode: .default) }, schedule: [(.default, 1.5)])
            await thread.waitUntilFinished()
            link.invalidate()
            let samples = recorder.all
            // Every due vblank between the first and last callback was delivered or counted skipped.
            let due = Int(try #require(samples.last).frame.sequence - samples[0].frame.sequence) + 1
            let skipped = samples.dropFirst().reduce(0) { $0 + $1.frame.skipped }
            #expect(samples.count + skipped == due, "\(samples.count) delivered + \(skipped) skipped vs \(due) due")
            try #require(samples.count >= 30, "\(samples.count) callbacks in 1.5 s")
            #expect(samples.allSatisfy { $0.mode == RunLoop.Mode.default.rawValue })
            // The vblanks that came while a slow callback ran are skipped, not queued: after it
            // returns at most one callback (the one frame waiting for it) gets a vblank from
            // before it returned. Judged by the vblanks' own times, not by how soon vsyncd and
            // the reader got a CPU: on a loaded machine that frame may be only 2 old.
            for slow in 19...21 {
                let returned = samples[slow].calledNs + 100_000_000
                let stale = samples[(slow + 1)...].filter { $0.frame.timestampNanoseconds < returned }.map(\.frame.sequence)
                #expect(stale.count <= 1, "after the slow callback at sequence \(samples[slow].frame.sequence), vblanks from while it ran: \(stale)")
            }
            // So the frame after the slow phase is from 200 ms or more after the first slow
            // callback's (11 vblanks and more), and those in between were counted.
            let afterSlow = samples[20...22].map(\.frame.skipped)
            #expect(afterSlow.reduce(0, +) >= 8, "skipped after 100 ms callbacks: \(afterSlow)")
            // No backlog behind the slow callbacks: later ones run soon after their vblank.
            let ages = samples[22...].map { Double($0.calledNs - $0.frame.timestampNanoseconds) / 1e6 }.sorted()
            #expect(ages[ages.count * 9 / 10] < 40, "callback ages after the slow phase (ms): \(ages)")
        }

        @Test func reconnectsWithinASecondAfterTheDaemonIsKilledAndRestarted() async throws {
            let daemon = try DaemonProcess(hertz: 60, logLevel: "warning")
            defer { daemon.stop() }
            let recorder = LinkRecorder()
            let link = DisplayLink(socketPath: daemon.socketPath, handler: recorder.handler())
            link.errorHandler = recorder.errorHandler()
            link.preferredFramesPerSecond = 20
            link.start(on: DispatchQueue(label: "restart"))
            #expect(await eventually(timeout: 1.5) { recorder.count >= 3 })
            daemon.kill()
            #expect(await eventually(timeout: 1) { recorder.errors.withLock { $0.contains(.connectionLost(socketPath: daemon.socketPath)) } })
            // Time itself is the condition here (no event to wait for): down long enough for the
            // reconnect backoff to reach its maximum, the worst case for how soon ticks resume.
            await sleep(seconds: 1.2)
            let before = recorder.count
            try daemon.start()
            let back = DisplayLink.currentTime()
            #expect(await eventually(timeout: 2) { recorder.count > before })
            let delay = DisplayLink.currentTime() - back
            #expect(delay < 1.0, "ticks resumed \(delay) s after vsyncd was back")
            // Re-subscribed with its rate: 20 Hz.
            #expect(await eventually(timeout: 1) { recorder.count > before + 2 })
            let last = try #require(recorder.all.last, "no frame after the restart").frame
            #expect(Self.close(last.targetTimestampNanoseconds - last.timestampNanoseconds, 3 * last.durationNanoseconds))
            link.invalidate()
        }

        /// An app with two links on one display that exits (or invalidates both at once) closes
        /// its socket with two live subscriptions. vsyncd must drop both without touching the
        /// closed client (an early vsyncd aborted in Server `offer` reading an unowned
        /// `sub.client` when a vblank came first: the first send failed, the client was freed,
        /// and the second subscription in the same loop still pointed at it).
        @Test func vsyncdSurvivesClientsClosingWithTwoLiveSubscriptions() async throws {
            let daemon = try DaemonProcess(hertz: 250, logLevel: "warning")
            defer { daemon.stop() }
            for round in 0..<100 {
                let client = try RawClient(path: daemon.socketPath)
                client.send(.hello(Hello(minVersion: 1, maxVersion: 1, clientName: "two-links")))
                guard case .message(.welcome) = client.receive(timeout: 2) else {
                    Issue.record("no WELCOME in round \(round)")
                    client.close()
                    break
                }
                for id: UInt32 in [1, 2] {
                    client.send(.subscribe(Subscribe(subscriptionID: id, selector: .primary, range: .default)))
                }
                var ticks = 0
                while ticks < 2, case .message(let message) = client.receive(timeout: 1) {
                    if case .tick = message { ticks += 1 }
                }
                client.close()
                usleep(UInt32.random(in: 0...4_000))
                if !daemon.isRunning { break }
            }
            // Alive and still serving: a new client gets its ticks.
            let witness = try VblankWitness(socketPath: daemon.socketPath)
            #expect(await witness.wait(vblanks: 5) != nil)
            #expect(daemon.isRunning, "vsyncd died after a client closed with two live subscriptions")
        }
    }
}

enum FrameRateRangeForTests {
    static func make(_ min: Float, _ max: Float, _ preferred: Float) throws -> DisplayLink.RateRange {
        try DisplayLink.RateRange(minimum: min, maximum: max, preferred: preferred)
    }
}
