@_spi(Benchmark) @testable import DisplayLink
import Dispatch
import Foundation
import Glibc
import Synchronization
import Testing

/// What FrameWork promises an app beyond committing on time: where its threads stand, which
/// thread takes a run, what a run's deadline means, what happens once the link is gone, which
/// targets it takes, and what FrameMonitor counts of it. Against a real vsyncd on its timer
/// source where a link is needed; judged by vblank sequence and by the counts, never by a sleep.
extension DisplayLinkTests {
    @Suite
    struct FrameWorkContract {
        static func daemon() throws -> DaemonProcess { try DaemonProcess(hertz: 60, logLevel: "warning") }

        /// The calling thread's nice value and scheduling policy (Linux keeps both per thread).
        static func scheduling() -> (nice: Int32, policy: Int32) {
            (getpriority(Int32(PRIO_PROCESS.rawValue), 0), sched_getscheduler(0))
        }

        /// Runs `body` on one of the pool's threads and returns what it returned.
        static func onPool<T: Sendable>(_ pool: FrameWorkPool, _ body: @escaping @Sendable () -> T) -> T {
            let result = Mutex<T?>(nil)
            let done = DispatchSemaphore(value: 0)
            pool.submit {
                result.withLock { $0 = body() }
                done.signal()
            }
            done.wait()
            return result.withLock { $0! }
        }

        /// The calling thread's kernel name.
        static func threadName() -> String {
            ((try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
        }

        /// What a thread started from the calling one is scheduled at.
        static func schedulingOfAThreadStartedHere() -> (nice: Int32, policy: Int32) {
            let seen = Mutex<(nice: Int32, policy: Int32)>((0, 0))
            let done = DispatchSemaphore(value: 0)
            Thread {
                seen.withLock { $0 = Self.scheduling() }
                done.signal()
            }.start()
            done.wait()
            return seen.withLock { $0 }
        }

        /// A pool as wide as the machine, kept busy, leaves the link's thread no core: the
        /// default pool leaves one (one thread fewer than the active cores, at least one).
        @Test func theDefaultPoolLeavesACoreForTheLink() {
            let cores = ProcessInfo.processInfo.activeProcessorCount
            #expect(FrameWorkPool.defaultThreadCount == min(max(cores - 1, 1), 16))
            #expect(FrameWorkPool.shared.threadCount == FrameWorkPool.defaultThreadCount)
            #expect(FrameWorkPool().threadCount == FrameWorkPool.defaultThreadCount)
            if cores > 1 { #expect(FrameWorkPool.shared.threadCount < cores) }
        }

        /// The pool's threads keep the app's priority, and so do the threads a draw starts
        /// (libdispatch's workers among them). A lowered pool, measured by the benchmark only,
        /// would pass its priority on: the reason no public pool is lowered.
        @Test func threadsADrawStartsKeepTheAppsPriority() {
            let mine = Self.scheduling()
            let pool = FrameWorkPool(threadCount: 1)
            #expect(Self.onPool(pool) { Self.scheduling() } == mine)
            #expect(Self.onPool(pool) { Self.schedulingOfAThreadStartedHere() } == mine)
            #expect(Self.onPool(FrameWorkPool(threadCount: 1, priority: .nice(5))) { Self.scheduling() }.nice == min(mine.nice + 5, 19))
            #expect(Self.onPool(FrameWorkPool(threadCount: 1, priority: .batch)) { Self.scheduling() }.policy == 3)  // SCHED_BATCH
            let idle = FrameWorkPool(threadCount: 1, priority: .idle)
            #expect(Self.onPool(idle) { Self.scheduling() }.policy == 5)  // SCHED_IDLE
            #expect(Self.onPool(idle) { Self.schedulingOfAThreadStartedHere() }.policy == 5, "inherited by what it starts")
        }

        /// Async work runs on the pool's threads too, so the pool bounds it as it bounds closures.
        @Test func asyncWorkRunsOnThePoolsThreads() async throws {
            let daemon = try Self.daemon()
            defer { daemon.stop() }
            let seen = Mutex<[String]>([])
            let work = FrameWork<Int, Int>(pool: FrameWorkPool(threadCount: 2))
            let link = DisplayLink(socketPath: daemon.socketPath) { link in
                work.advance(link) { _ in } requesting: {
                    work.requestTask(0) { _ in
                        await Task.yield()  // resumed on the executor the task prefers
                        seen.withLock { $0.append(Self.threadName()) }
                        return 0
                    }
                }
            }
            link.start(on: DispatchQueue(label: "async-pool"))
            #expect(await eventually(timeout: 3) { seen.withLock { $0.count } >= 5 })
            link.invalidate()
            #expect(seen.withLock { $0 }.allSatisfy { $0.hasPrefix("FrameWork.") }, "\(seen.withLock { $0 })")
        }

        /// One thread is stuck in a long draw for 90 frames; a key requested every sixth frame
        /// meanwhile is taken by the free thread each time, never waiting behind the long draw
        /// until the next request replaces it (six frames later: room for a busy machine). Judged by the runs that began, not by commits,
        /// which a frame the link skips on a busy machine would also miss.
        @Test func aRunBehindALongDrawIsTakenByAFreeThread() async throws {
            let daemon = try Self.daemon()
            defer { daemon.stop() }
            let release = DispatchSemaphore(value: 0)
            let frames = Atomic<Int>(0)
            let longStarted = Atomic<Int>(0)
            let longReturned = Atomic<Int>(0)
            let shortAsked = Mutex<[Int]>([])
            let shortBegan = Mutex<[Int]>([])
            let work = FrameWork<String, Int>(pool: FrameWorkPool(threadCount: 2))
            let link = DisplayLink(socketPath: daemon.socketPath) { link in
                let n = frames.add(1, ordering: .relaxed).newValue
                work.advance(link) { _ in } requesting: {
                    // Asked again each frame until a thread took it (a busy machine can make the
                    // first one late before it begins); only the first to begin sticks.
                    if n >= 2 && longStarted.load(ordering: .relaxed) == 0 {
                        work.request("long") { _ in
                            guard longStarted.compareExchange(expected: 0, desired: frames.load(ordering: .relaxed),
                                                              ordering: .relaxed).exchanged else { throw CancellationError() }
                            release.wait()
                            longReturned.store(frames.load(ordering: .relaxed), ordering: .relaxed)
                            return 0
                        }
                    }
                    if n % 6 == 0 {
                        shortAsked.withLock { $0.append(n) }
                        work.request("short", for: .framesAhead(3)) { _ in
                            shortBegan.withLock { $0.append(n) }
                            return n
                        }
                    }
                }
                let started = longStarted.load(ordering: .relaxed)
                if started > 0 && n >= started + 90 { release.signal() }
            }
            link.start(on: DispatchQueue(label: "queue-choice"))
            #expect(await eventually(timeout: 12) { longReturned.load(ordering: .relaxed) > 0 })
            link.invalidate()
            release.signal()
            let (started, returned) = (longStarted.load(ordering: .relaxed), longReturned.load(ordering: .relaxed))
            let asked = shortAsked.withLock { $0 }.filter { $0 > started && $0 < returned - 6 }
            let began = Set(shortBegan.withLock { $0 }).intersection(asked)
            // Sent to two queues in turn, every other run sat behind the long draw: half began.
            #expect(began.count * 4 >= asked.count * 3,
                    "\(began.count) of \(asked.count) short runs began while one thread drew for \(returned - started) frames: \(work.counts)")
        }

        /// `commitDeadlineNanoseconds` is the run's target less the lead its starting frame had
        /// on its own target (bracketed by the times before and after that frame's advance),
        /// whatever the work duration: not the target less the work duration.
        @Test(arguments: [0, 4]) func theCommitDeadlineIsTheExpectedCommitPoint(workMs: Int) async throws {
            let daemon = try Self.daemon()
            defer { daemon.stop() }
            struct Started: Sendable { var frameTargetNs: UInt64; var before: UInt64; var after: UInt64 }
            let started = Mutex<[UInt64: Started]>([:])  // by the run's target sequence
            let runs = Mutex<[FrameWorkRun]>([])
            let work = FrameWork<Int, Int>(pool: FrameWorkPool(threadCount: 1))
            let link = DisplayLink(socketPath: daemon.socketPath) { link in
                guard let frame = link.currentFrame else { return }
                let before = DisplayLink.currentTimeNanoseconds()
                work.advance(link) { _ in } requesting: {
                    work.request(0) { run in
                        runs.withLock { $0.append(run) }
                        return 0
                    }
                }
                let after = DisplayLink.currentTimeNanoseconds()
                started.withLock { $0[frame.frameTimelines[1].sequence] = Started(frameTargetNs: frame.targetTimestampNanoseconds, before: before, after: after) }
            }
            try link.setWorkDuration(.milliseconds(workMs))
            link.start(on: DispatchQueue(label: "deadline"))
            #expect(await eventually(timeout: 4) { runs.withLock { $0.count } >= 20 })
            link.invalidate()
            var checked = 0
            for run in runs.withLock({ $0 }) {
                guard let s = started.withLock({ $0[run.targetSequence] }) else { continue }
                checked += 1
                // A frame whose handler ran after its target had no lead: 0.
                let lead = run.targetTimestampNanoseconds - run.commitDeadlineNanoseconds
                let (least, most) = (s.frameTargetNs > s.after ? s.frameTargetNs - s.after : 0,
                                     s.frameTargetNs > s.before ? s.frameTargetNs - s.before : 0)
                #expect(lead >= least && lead <= most, "lead \(lead) ns outside [\(least), \(most)]")
            }
            #expect(checked >= 15)
        }

        /// The monitor counts the frame work from its start, so requests made before its first
        /// callback are counted and its figures never show more committed than requested.
        @Test func theMonitorCountsFrameWorkFromItsStart() async throws {
            let daemon = try Self.daemon()
            defer { daemon.stop() }
            let work = FrameWork<Int, Int>()
            let queue = DispatchQueue(label: "monitor")
            queue.suspend()  // no callback of the monitor before the requests
            let monitor = FrameMonitor(socketPath: daemon.socketPath, frameWork: work) { _ in }
            monitor.start(on: queue)
            for i in 0..<3 { work.request(i) { _ in i } }
            queue.resume()
            #expect(await eventually(timeout: 3) { monitor.totals.frames >= 1 })
            monitor.invalidate()
            #expect(monitor.totals.frameWork.requested == 3, "\(monitor.totals.frameWork)")
        }

        /// Once the link is invalidated, nothing outstanding is left waiting for a frame that
        /// will not come: pending requests, and any made afterwards, are counted `abandoned`.
        @Test func invalidatingTheLinkClosesTheCounts() async throws {
            let daemon = try Self.daemon()
            defer { daemon.stop() }
            let witness = try VblankWitness(socketPath: daemon.socketPath)
            let committed = Atomic<Int>(0)
            let ran = Atomic<Int>(0)
            let work = FrameWork<Int, Int>()
            let link = DisplayLink(socketPath: daemon.socketPath) { link in
                work.advance(link) { _ in committed.add(1, ordering: .relaxed) } requesting: {
                    work.request(0) { _ in 0 }
                }
            }
            link.start(on: DispatchQueue(label: "invalidated"))
            #expect(await eventually(timeout: 3) { committed.load(ordering: .relaxed) >= 2 })
            link.invalidate()
            #expect(work.link === link)
            work.request(1) { _ in ran.add(1, ordering: .relaxed); return 1 }
            #expect(work.counts.abandoned >= 1, "\(work.counts)")
            await witness.wait(vblanks: 4)
            let c = work.counts
            #expect(ran.load(ordering: .relaxed) == 0)
            #expect(c.outstanding == 0, "\(c)")
            #expect(c.requested == c.committed + c.cancelled + c.coalesced, "\(c)")

            // Another link takes the work up again.
            let again = DisplayLink(socketPath: daemon.socketPath) { link in
                work.advance(link) { _ in committed.add(1, ordering: .relaxed) } requesting: { work.request(2) { _ in 2 } }
            }
            let before = committed.load(ordering: .relaxed)
            again.start(on: DispatchQueue(label: "again"))
            #expect(await eventually(timeout: 3) { committed.load(ordering: .relaxed) >= before + 2 })
            again.invalidate()
            let after = work.counts
            #expect(after.outstanding == 0 && after.requested == after.committed + after.cancelled + after.coalesced, "\(after)")
        }

        /// A request pending when the link goes (never started by a frame) is abandoned, not kept.
        @Test func aRequestPendingAtInvalidationIsAbandoned() async throws {
            let daemon = try Self.daemon()
            defer { daemon.stop() }
            let advanced = Atomic<Int>(0)
            let invalidated = Atomic<Bool>(false)
            let work = FrameWork<Int, Int>()
            let link = DisplayLink(socketPath: daemon.socketPath) { link in
                work.advance(link) { _ in }
                advanced.add(1, ordering: .relaxed)
                if advanced.load(ordering: .relaxed) == 3 {
                    work.request(9) { _ in 9 }  // after this frame's advance: waits for the next
                    link.invalidate()
                    invalidated.store(true, ordering: .releasing)  // invalidate() has returned
                }
            }
            link.start(on: DispatchQueue(label: "pending"))
            #expect(await eventually(timeout: 3) { invalidated.load(ordering: .acquiring) })
            let c = work.counts
            #expect(c.requested == 1 && c.abandoned == 1 && c.outstanding == 0, "\(c)")
        }

        /// Targets beyond what a frame's timelines predict are refused, not clamped.
        @Test func framesAheadOutsideOneToThreeIsRefused() async {
            #expect(FrameWork<Int, Int>.Target.framesAhead(1) == .nextFrame)
            #expect(FrameWork<Int, Int>.Target.framesAhead(3).index == 3)
            await #expect(processExitsWith: .failure) { _ = FrameWork<Int, Int>.Target.framesAhead(0) }
            await #expect(processExitsWith: .failure) { _ = FrameWork<Int, Int>.Target.framesAhead(4) }
            await #expect(processExitsWith: .failure) { _ = FrameWork<Int, Int>.Target.framesAhead(-1) }
        }
    }
}
