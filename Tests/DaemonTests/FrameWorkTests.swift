@testable import DisplayLink
import Dispatch
import Foundation
import Glibc
import Synchronization
import Testing

/// Frame work on vsyncd's timer source with deterministic draw costs. Everything is
/// judged by vblank sequence: which frame committed what, for which target; the costs are
/// simulated with sleeps (the work), never used to wait for an event.
extension DisplayLinkTests {
    @Suite
    struct FrameWorkSuite {
        /// What one committed result says about itself, recorded on the committing context.
        struct Committed: Sendable {
            var key: Int
            var serial: Int
            var targetSequence: UInt64
            var frameTargetSequence: UInt64
            var frameTargetNs: UInt64
            var committedNs: UInt64
            var newestRequested: Int
            var onContext: Bool
        }

        struct Drawn: Sendable {
            var key: Int
            var serial: Int
        }

        /// The test's side of the scene, touched only on the committing context (the link's queue).
        final class Scene: @unchecked Sendable {
            var frames = 0
            var serial = 0
            var newest: [Int: Int] = [:]
            var requests = 0
            var commits: [Committed] = []
        }

        /// Draw costs in frames, by key and frame: every key meets every cost.
        static let costs = [0.2, 0.8, 1.5]
        static let frameNs: Double = 1e9 / 60

        /// Simulated drawing: `cost` frames in eight steps, giving up at the first check that
        /// says the result would never be committed (the sentinel). Never on the context.
        static func draw(_ key: Int, serial: Int, cost: Double, run: FrameWorkRun, contextKey: DispatchSpecificKey<Int>,
                         drewOnContext: borrowing Atomic<Int>) throws -> Drawn {
            if DispatchQueue.getSpecific(key: contextKey) != nil { drewOnContext.add(1, ordering: .relaxed) }
            for _ in 0..<8 {
                try run.checkCancellation()
                usleep(UInt32(cost * frameNs / 8 / 1000))
            }
            try run.checkCancellation()
            return Drawn(key: key, serial: serial)
        }

        @Test func mixedCostsOnEightKeysCommitOnlyCurrentResultsOnTime() async throws {
            let daemon = try DaemonProcess(hertz: 60, logLevel: "warning")
            defer { daemon.stop() }
            let pool = FrameWorkPool(threadCount: 2)
            let contextKey = DispatchSpecificKey<Int>()
            let context = DispatchQueue(label: "commit-context")
            context.setSpecific(key: contextKey, value: 1)
            let drewOnContext = Atomic<Int>(0)
            let scene = Scene()
            let requestingFrames = 120
            let work = FrameWork<Int, Drawn>(pool: pool)
            let link = DisplayLink(socketPath: daemon.socketPath) { link in
                scene.frames += 1
                let n = scene.frames
                work.advance(link) { done in
                    let frame = link.currentFrame
                    scene.commits.append(Committed(
                        key: done.key, serial: done.output.serial, targetSequence: done.targetSequence,
                        frameTargetSequence: frame?.targetSequence ?? 0, frameTargetNs: frame?.targetTimestampNanoseconds ?? 0,
                        committedNs: DisplayLink.currentTimeNanoseconds(), newestRequested: scene.newest[done.key] ?? -1,
                        onContext: DispatchQueue.getSpecific(key: contextKey) == 1))
                } requesting: {
                    guard n <= requestingFrames else { return }
                    for key in 0..<8 {
                        // Every fourth frame key 0 is asked twice: the first of the two coalesces.
                        for _ in 0..<(key == 0 && n % 4 == 0 ? 2 : 1) {
                            scene.serial += 1
                            let serial = scene.serial
                            scene.newest[key] = serial
                            scene.requests += 1
                            let cost = Self.costs[(key + n) % 3]
                            work.request(key) { run in
                                try Self.draw(key, serial: serial, cost: cost, run: run, contextKey: contextKey, drewOnContext: drewOnContext)
                            }
                        }
                    }
                }
            }
            link.start(on: context)
            // The requests end after 120 frames; every one of them then settles.
            #expect(await eventually(timeout: 15) { context.sync { scene.frames } > requestingFrames && work.counts.outstanding == 0 })
            link.invalidate()

            let (commits, requests) = context.sync { (scene.commits, scene.requests) }
            let counts = work.counts
            #expect(requests == 8 * requestingFrames + requestingFrames / 4)
            #expect(counts.requested == requests)
            #expect(counts.coalesced == requestingFrames / 4, "\(counts)")
            #expect(counts.requested == counts.committed + counts.cancelled + counts.coalesced, "\(counts)")
            #expect(counts.failed == 0)
            #expect(counts.committed == commits.count)
            #expect(counts.committed > 0, "some draws made their frame: \(counts)")
            for c in commits {
                // Never superseded: the newest request for the key when it was committed.
                #expect(c.serial == c.newestRequested, "key \(c.key): committed \(c.serial), newest \(c.newestRequested)")
                // For the frame it was made for, before that frame's target vblank, on the context.
                #expect(c.targetSequence == c.frameTargetSequence)
                #expect(c.committedNs < c.frameTargetNs, "committed \(Double(c.committedNs) - Double(c.frameTargetNs)) ns after its target")
                #expect(c.onContext)
            }
            // At most one commit per key and frame, in request order within a frame.
            for (_, batch) in Dictionary(grouping: commits, by: \.targetSequence) {
                #expect(Set(batch.map(\.key)).count == batch.count)
                #expect(batch.map(\.serial) == batch.map(\.serial).sorted())
            }
            // The 1.5-frame draws never commit: a newer request (the next frame's) or their
            // target's commit point always comes first.
            #expect(drewOnContext.load(ordering: .relaxed) == 0, "drawing ran on the committing context")
            let peaks = work.state.withLock { $0.peaks }
            print("frame work, 8 keys × 120 frames, costs 0.2/0.8/1.5 frames, pool of \(pool.threadCount): \(counts); \(peaks)")
            #expect(peaks.executing <= pool.threadCount, "\(peaks)")
            #expect(peaks.waitingPerKey <= 1 && peaks.inFlightPerKey <= 1 + pool.threadCount, "\(peaks)")
        }

        /// A draw that cannot finish until the context has gone 30 frames on: the context keeps
        /// ticking and committing meanwhile, and the stuck result, late by then, is never committed.
        @Test func theCommittingContextIsNeverBlockedByDrawing() async throws {
            let daemon = try DaemonProcess(hertz: 60, logLevel: "warning")
            defer { daemon.stop() }
            let pool = FrameWorkPool(threadCount: 2)
            let release = DispatchSemaphore(value: 0)
            let frames = Atomic<Int>(0)
            let stuckStarted = Atomic<Int>(0)
            let stuckReturned = Atomic<Int>(0)
            let committed = Mutex<[(output: String, frame: Int)]>([])
            let work = FrameWork<String, String>(pool: pool)
            let link = DisplayLink(socketPath: daemon.socketPath) { link in
                let n = frames.add(1, ordering: .relaxed).newValue
                work.advance(link) { done in
                    committed.withLock { $0.append((done.output, n)) }
                } requesting: {
                    // Asked again each frame until a thread took it: a busy machine can make the
                    // first one late before it begins.
                    if n >= 2 && stuckStarted.load(ordering: .relaxed) == 0 {
                        work.request("stuck") { _ in
                            // Only the first to begin sticks; one asked for meanwhile gives up.
                            guard stuckStarted.compareExchange(expected: 0, desired: frames.load(ordering: .relaxed),
                                                               ordering: .relaxed).exchanged else { throw CancellationError() }
                            release.wait()
                            stuckReturned.store(frames.load(ordering: .relaxed), ordering: .relaxed)
                            return "stuck"
                        }
                    }
                    if n % 2 == 0 { work.request("cheap", for: .framesAhead(2)) { _ in "cheap" } }
                }
                if stuckStarted.load(ordering: .relaxed) > 0 && n >= stuckStarted.load(ordering: .relaxed) + 30 { release.signal() }
            }
            link.start(on: DispatchQueue(label: "unblocked"))
            #expect(await eventually(timeout: 5) { stuckReturned.load(ordering: .relaxed) > 0 })
            #expect(await eventually(timeout: 2) { frames.load(ordering: .relaxed) >= stuckReturned.load(ordering: .relaxed) + 3 })
            link.invalidate()
            release.signal()
            let (started, returned) = (stuckStarted.load(ordering: .relaxed), stuckReturned.load(ordering: .relaxed))
            #expect(started > 0 && returned >= started + 30, "the stuck draw ran from frame \(started) to \(returned)")
            let outputs = committed.withLock { $0 }
            #expect(!outputs.contains { $0.output == "stuck" }, "a result past its target was committed")
            // While the draw was stuck on one pool thread, the context went on taking frames and
            // committing the cheap key's results from the other. (How many of them make their
            // frame on a busy machine is the queue-choice test's concern, judged by runs begun.)
            let meanwhile = outputs.filter { $0.output == "cheap" && $0.frame > started && $0.frame <= returned }
            #expect(!meanwhile.isEmpty, "no commit during the stuck draw's \(returned - started) frames")
        }

        /// `async` work: a run overtaken by its target sees its Task cancelled; a short one commits.
        @Test func asyncWorkIsCancelledThroughItsTask() async throws {
            let daemon = try DaemonProcess(hertz: 60, logLevel: "warning")
            defer { daemon.stop() }
            let sawCancellation = Atomic<Int>(0)
            let notInATask = Atomic<Int>(0)
            let committed = Mutex<[String]>([])
            let frames = Atomic<Int>(0)
            // Two threads: the slow run holds one until it is cancelled.
            let work = FrameWork<String, String>(pool: FrameWorkPool(threadCount: 2))
            let link = DisplayLink(socketPath: daemon.socketPath) { link in
                let n = frames.add(1, ordering: .relaxed).newValue
                work.advance(link) { done in
                    committed.withLock { $0.append(done.output) }
                } requesting: {
                    guard n <= 30 else { return }
                    // Three frames of waiting for a one-frame target: its commit point passes.
                    work.requestTask("slow") { run in
                        for _ in 0..<30 {
                            if Task.isCancelled {
                                #expect(run.isCancelled)
                                sawCancellation.add(1, ordering: .relaxed)
                                throw CancellationError()
                            }
                            try? await Task.sleep(nanoseconds: 2_000_000)
                        }
                        return "slow"
                    }
                    // No `await`: still run in a task of its own, on a pool thread.
                    work.requestTask("quick") { _ in
                        if withUnsafeCurrentTask(body: { $0 == nil }) { notInATask.add(1, ordering: .relaxed) }
                        return "quick"
                    }
                }
            }
            link.start(on: DispatchQueue(label: "async-work"))
            #expect(await eventually(timeout: 8) { frames.load(ordering: .relaxed) > 30 && work.counts.outstanding == 0 })
            link.invalidate()
            let counts = work.counts
            #expect(sawCancellation.load(ordering: .relaxed) >= 1, "no async run saw its Task cancelled: \(counts)")
            #expect(!committed.withLock { $0 }.contains("slow"))
            #expect(committed.withLock { $0 }.contains("quick"))
            #expect(notInATask.load(ordering: .relaxed) == 0, "requestTask ran a closure with no await outside a task")
            #expect(counts.requested == counts.committed + counts.cancelled + counts.coalesced, "\(counts)")
        }

        /// Ten requests for one key between two frames cost one run, committed at the frame
        /// whose target it was made for; FrameMonitor reports the counts beside its frames.
        /// A machine busy enough to keep the run off a core for three frames makes it late,
        /// not wrong: that burst is counted and another one made, at most three.
        @Test func requestsBetweenFramesCoalesceAndTheMonitorReportsThem() async throws {
            let daemon = try DaemonProcess(hertz: 60, logLevel: "warning")
            defer { daemon.stop() }
            let runs = Atomic<Int>(0)
            let bursts = Atomic<Int>(0)  // asked for by the test, made in the next frame's requests
            let made = Atomic<Int>(0)
            let committed = Mutex<[(UInt64, UInt64, Int)]>([])
            let work = FrameWork<String, Int>(pool: FrameWorkPool(threadCount: 1))
            let link = DisplayLink(socketPath: daemon.socketPath) { link in
                work.advance(link) { done in
                    committed.withLock { $0.append((done.targetSequence, link.currentFrame?.targetSequence ?? 0, done.output)) }
                } requesting: {
                    guard made.load(ordering: .relaxed) < bursts.load(ordering: .relaxed) else { return }
                    made.add(1, ordering: .relaxed)
                    for i in 1...10 {
                        work.request("title", for: .framesAhead(3)) { _ in
                            runs.add(1, ordering: .relaxed)
                            return i
                        }
                    }
                }
            }
            let reports = Mutex<[FrameMonitor.Report]>([])
            let monitor = FrameMonitor(socketPath: daemon.socketPath, frameWork: work) { report in reports.withLock { $0.append(report) } }
            monitor.start(on: DispatchQueue(label: "monitor"))
            link.start(on: DispatchQueue(label: "coalesce"))
            for attempt in 1...3 {
                bursts.store(attempt, ordering: .relaxed)
                #expect(await eventually(timeout: 3) { work.counts.requested == 10 * attempt && work.counts.outstanding == 0 })
                if !committed.withLock({ $0.isEmpty }) { break }
            }
            #expect(await eventually(timeout: 4) { !reports.withLock { $0.isEmpty } })
            link.invalidate()
            monitor.invalidate()
            let counts = work.counts
            let attempts = made.load(ordering: .relaxed)
            #expect(runs.load(ordering: .relaxed) <= attempts)
            #expect(counts.requested == 10 * attempts && counts.coalesced == 9 * attempts && counts.committed == 1
                    && counts.late == attempts - 1, "\(counts) in \(attempts) bursts")
            let first = try #require(committed.withLock { $0.first })
            #expect(first.0 == first.1, "committed for target \(first.0) at the frame with target \(first.1)")
            #expect(first.2 == 10, "the newest request's result")
            #expect(monitor.totals.frameWork.committed == 1 && monitor.totals.frameWork.coalesced == 9 * attempts,
                    "\(monitor.totals.frameWork)")
        }
    }
}
