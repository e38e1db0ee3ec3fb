@testable import DisplayLink
import Glibc
import Foundation
import Synchronization
import Testing

/// Every DisplayLink suite (and the client suites beside them) runs under this one serialized
/// parent, one test at a time, also under a plain parallel `swift test`: they count frames of a
/// real vsyncd on a 2-core machine.
@Suite(.serialized)
enum DisplayLinkTests {}

/// DisplayLink's own behaviour (delivery contexts, coalescing, lifetime, errors) against the REAL
/// vsyncd on its timer source (`DaemonProcess`). Display events, which the timer source never
/// has, are in DisplayLinkDisplayEventTests.swift, against the real server on a scripted source.
extension DisplayLinkTests {
    @Suite
    struct Library {
        static func daemon() throws -> DaemonProcess { try DaemonProcess(hertz: 60, logLevel: "warning") }

        @Test func queueDeliveryCarriesTheDaemonsTimes() async throws {
            let daemon = try Self.daemon()
            defer { daemon.stop() }
            let recorder = LinkRecorder()
            let link = DisplayLink(socketPath: daemon.socketPath, handler: recorder.handler())
            link.start(on: DispatchQueue(label: "test"))
            #expect(await eventually(timeout: 3) { recorder.count >= 20 })
            link.invalidate()
            let samples = recorder.all
            let period = try #require(samples.first).frame.durationNanoseconds
            #expect(abs(Int64(period) - 16_666_667) <= 1)
            for s in samples {
                // vsyncd's timestamps are whole ns: a 1/60 s step is 16 666 666 or 16 666 667.
                #expect(abs(Int64(s.frame.targetTimestampNanoseconds - s.frame.timestampNanoseconds) - Int64(period)) <= 2)
                #expect(s.frame.durationNanoseconds == period)
                #expect(s.maximumFramesPerSecond == 60)
                #expect(s.frame.isSynthetic)
                // Read off the socket after its vblank, and the callback after that.
                #expect(s.frame.timestampNanoseconds <= s.frame.receivedNanoseconds && s.frame.receivedNanoseconds <= s.calledNs)
            }
            // Soon after: the median callback runs within a frame of its vblank (p50 on an idle
            // machine is well under 1 ms; a frame leaves room for a loaded one).
            let ages = samples.map { $0.calledNs - $0.frame.timestampNanoseconds }.sorted()
            #expect(ages[ages.count / 2] < period, "median callback age \(Double(ages[ages.count / 2]) / 1e6) ms")
            #expect(link.isSynthetic)
            #expect(abs(link.duration - 1.0 / 60) < 1e-6)
        }

        @Test func slowHandlerSkipsFramesWithoutBacklog() async throws {
            let daemon = try Self.daemon()
            defer { daemon.stop() }
            let recorder = LinkRecorder()
            let calls = Atomic<Int>(0)
            let link = DisplayLink(socketPath: daemon.socketPath) { link in
                recorder.record(link)
                // The first five callbacks take 100 ms each: six frames' worth (simulated work).
                if calls.add(1, ordering: .relaxed).newValue <= 5 { usleep(100_000) }
            }
            link.start(on: DispatchQueue(label: "slow"))
            #expect(await eventually(timeout: 4) { recorder.count >= 25 })
            link.invalidate()
            let samples = recorder.all
            try #require(samples.count >= 25, "\(samples.count) callbacks")
            // After each slow callback the next one skipped the frames it could not take…
            let skippedAfterSlow = samples[1...5].map(\.frame.skipped)
            #expect(skippedAfterSlow.reduce(0, +) >= 20 && skippedAfterSlow.allSatisfy { $0 >= 2 },
                    "skipped after slow callbacks: \(skippedAfterSlow)")
            // …and carried a recent tick, not a queued old one: a backlog behind 0.5 s of slow
            // callbacks would make most later callbacks run hundreds of ms after their vblank.
            let ages = samples[6...].map { Double($0.calledNs - $0.frame.timestampNanoseconds) / 1e6 }.sorted()
            #expect(ages[ages.count * 9 / 10] < 50, "callback ages after the slow phase (ms): \(ages)")
            // Sequences account for every frame: each gap is the skipped count plus one.
            for (a, b) in zip(samples, samples.dropFirst()) {
                #expect(b.frame.sequence - a.frame.sequence == UInt64(b.frame.skipped + 1))
            }
        }

        @Test func pauseStopsCallbacksAndResumeRestarts() async throws {
            let daemon = try Self.daemon()
            defer { daemon.stop() }
            let witness = try VblankWitness(socketPath: daemon.socketPath)
            let recorder = LinkRecorder()
            let link = DisplayLink(socketPath: daemon.socketPath, handler: recorder.handler())
            link.start(on: DispatchQueue(label: "pause"))
            #expect(await eventually(timeout: 3) { recorder.count >= 5 })
            link.isPaused = true
            #expect(link.isPaused)
            // At most the callback already running when the pause came may still record.
            let paused = recorder.count
            #expect(await witness.wait(vblanks: 30) != nil, "the daemon kept ticking")
            #expect(recorder.count <= paused + 1, "\(recorder.count - paused) callbacks in 30 vblanks while paused")
            link.isPaused = false
            #expect(!link.isPaused)
            #expect(await eventually(timeout: 2) { recorder.count >= paused + 5 })
            link.invalidate()
        }

        @Test func invalidateIsIdempotentThreadSafeAndFinal() async throws {
            let daemon = try Self.daemon()
            defer { daemon.stop() }
            let witness = try VblankWitness(socketPath: daemon.socketPath)
            let recorder = LinkRecorder()
            let link = DisplayLink(socketPath: daemon.socketPath, handler: recorder.handler())
            link.start(on: DispatchQueue(label: "inv"))
            #expect(await eventually(timeout: 3) { recorder.count >= 3 })
            DispatchQueue.concurrentPerform(iterations: 8) { _ in link.invalidate() }
            link.invalidate()
            #expect(!link.isValid)
            let after = recorder.count
            // Scheduling an invalidated link does nothing.
            link.start(on: DispatchQueue(label: "again"))
            #expect(await witness.wait(vblanks: 30) != nil, "the daemon kept ticking")
            #expect(recorder.count <= after + 1, "\(recorder.count - after) callbacks in 30 vblanks after invalidate")
        }

        /// Seeds 000/001: a controller that owns a link whose callback uses the controller.
        final class Controller {
            var link: DisplayLink?
            let ticks = Atomic<Int>(0)
            init(socketPath: String) {
                link = DisplayLink(target: self, socketPath: socketPath) { controller, _ in
                    controller.ticks.add(1, ordering: .relaxed)
                }
                link?.start(on: DispatchQueue(label: "controller"))
            }
        }

        @Test func ownerOfATargetLinkIsReleased() async throws {
            let daemon = try Self.daemon()
            defer { daemon.stop() }
            weak var weakController: Controller?
            weak var weakLink: DisplayLink?
            do {
                let controller = Controller(socketPath: daemon.socketPath)
                weakController = controller
                weakLink = controller.link
                #expect(await eventually(timeout: 3) { controller.ticks.load(ordering: .relaxed) >= 3 })
            }
            #expect(weakController == nil, "the link kept its owner alive")
            // The orphaned link notices at its next frame, invalidates itself and is released.
            #expect(await eventually(timeout: 2) { weakLink == nil })
        }

        @Test func runLoopModes() async throws {
            let daemon = try Self.daemon()
            defer { daemon.stop() }
            let tracking = RunLoop.Mode("DisplayLinkTracking")
            let inDefault = LinkRecorder()
            let inCommon = LinkRecorder()
            let inBoth = LinkRecorder()
            let links = [
                DisplayLink(socketPath: daemon.socketPath, handler: inDefault.handler()),
                DisplayLink(socketPath: daemon.socketPath, handler: inCommon.handler()),
                DisplayLink(socketPath: daemon.socketPath, handler: inBoth.handler()),
            ]
            let madeCommon = Mutex(false)
            let thread = RunLoopThread(setup: { runLoop in
                madeCommon.withLock { $0 = addCommonModeToCurrentRunLoop(tracking) }
                links[0].add(to: runLoop, forMode: .default)
                links[1].add(to: runLoop, forMode: .common)
                links[2].add(to: runLoop, forMode: .default)
                links[2].add(to: runLoop, forMode: tracking)
            }, schedule: [(.default, 0.5), (tracking, 0.5), (.default, 0.5)])
            await thread.waitUntilFinished()
            links.forEach { $0.invalidate() }
            #expect(madeCommon.withLock { $0 })

            let defaultMode = RunLoop.Mode.default.rawValue
            let modes = { (r: LinkRecorder) in Dictionary(grouping: r.all, by: { $0.mode ?? "?" }).mapValues(\.count) }
            // .default: fires in default only, and catches up with ONE callback when default resumes.
            #expect(modes(inDefault)[tracking.rawValue] == nil)
            #expect(modes(inDefault)[defaultMode, default: 0] >= 30)
            let gaps = zip(inDefault.all, inDefault.all.dropFirst()).map { $1.frame.skipped }
            #expect(gaps.max() ?? 0 >= 20, "the link should skip the frames of the tracking phase")
            // .common and default+tracking: fire in both.
            for recorder in [inCommon, inBoth] {
                #expect(modes(recorder)[tracking.rawValue, default: 0] >= 15)
                #expect(modes(recorder)[defaultMode, default: 0] >= 30)
            }
        }

        @Test func removingTheLastModeStopsTheLink() async throws {
            let daemon = try Self.daemon()
            defer { daemon.stop() }
            let recorder = LinkRecorder()
            let removedAt = Mutex<UInt64?>(nil)
            // The fifth callback removes the link from its one mode, on the run loop's own thread.
            let link = DisplayLink(socketPath: daemon.socketPath) { link in
                recorder.record(link)
                if recorder.count == 5 {
                    link.remove(from: RunLoop.current, forMode: .default)
                    removedAt.withLock { $0 = link.sequence }
                }
            }
            let witness = try VblankWitness(socketPath: daemon.socketPath)
            let thread = RunLoopThread(setup: { link.add(to: $0, forMode: .default) }, schedule: [(.default, 2)])
            #expect(await eventually(timeout: 3) { removedAt.withLock { $0 } != nil })
            #expect(await witness.wait(vblanks: 30) != nil, "the daemon kept ticking")
            await thread.waitUntilFinished()
            #expect(recorder.count == 5, "\(recorder.count) callbacks; the link was removed at the fifth")
            #expect(link.isValid)
            link.invalidate()
        }

        @Test func asyncFramesSkipWhenSlowAndEndOnInvalidate() async throws {
            let daemon = try Self.daemon()
            defer { daemon.stop() }
            let link = DisplayLink(socketPath: daemon.socketPath) { _ in }
            var frames: [DisplayLink.Frame] = []
            for await frame in link.frames {
                frames.append(frame)
                // A consumer slow for 100 ms once (simulated work, six frames' worth).
                if frames.count == 3 { try await Task.sleep(nanoseconds: 100_000_000) }
                if frames.count == 10 { link.invalidate() }
            }
            #expect(frames.count == 10, "the stream ends on invalidate")
            let steps = zip(frames, frames.dropFirst()).map { $1.sequence - $0.sequence }
            #expect(zip(frames, frames.dropFirst()).allSatisfy { $1.sequence - $0.sequence == UInt64($1.skipped) + 1 })
            #expect(steps[2] >= 5, "a slow consumer skips frames: steps \(steps)")
        }

        @Test func noDaemonIsReportedOnceAndTheLinkStartsWhenOneAppears() async throws {
            let path = NSTemporaryDirectory() + "/dl-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).sock"
            let recorder = LinkRecorder()
            let link = DisplayLink(socketPath: path, handler: recorder.handler())
            link.errorHandler = recorder.errorHandler()
            let started = DisplayLink.currentTime()
            link.start(on: DispatchQueue(label: "nodaemon"))
            #expect(DisplayLink.currentTime() - started < 0.05, "start must not block")
            #expect(await eventually(timeout: 2) { !recorder.errors.withLock { $0.isEmpty } })
            let errors = recorder.errors.withLock { $0 }
            #expect(errors.first == .noDaemon(socketPath: path))
            #expect(errors.first?.description.contains("no vsyncd at \(path)") == true)
            // The link starts ticking by itself once a daemon appears. It was started after the
            // first error, so the link retried in between (every 50 ms at first), and reported
            // the failure once, not on every retry.
            let daemon = try DaemonProcess(hertz: 60, socketPath: path, logLevel: "warning")
            defer { daemon.stop() }
            #expect(await eventually(timeout: 3) { recorder.count >= 3 })
            #expect(recorder.errors.withLock { $0 } == [.noDaemon(socketPath: path)])
            link.invalidate()
        }

        @Test func unknownDisplaysAreErrorsAndConnectorsWait() async throws {
            let daemon = try Self.daemon()
            defer { daemon.stop() }
            let missing = LinkRecorder()
            let gone = DisplayLink(display: .display(99), socketPath: daemon.socketPath, handler: missing.handler())
            gone.errorHandler = missing.errorHandler()
            gone.start(on: DispatchQueue(label: "missing"))
            #expect(await eventually(timeout: 2) { !missing.errors.withLock { $0.isEmpty } })
            let error = missing.errors.withLock { $0.first }
            guard case .displayNotFound(let selector, let reason)? = error else {
                Issue.record("expected displayNotFound, got \(String(describing: error))")
                return
            }
            #expect(selector.contains("99") && reason.contains("timer"), "\(selector): \(reason)")
            #expect(error?.description.contains("vsync-probe list") == true)
            #expect(missing.count == 0)
            gone.invalidate()

            // A connector that is not there yet may still come: the link waits for it.
            let changes = Mutex<[DisplayLink.DisplayChange]>([])
            let later = DisplayLink(display: .connector("HDMI-A-9"), socketPath: daemon.socketPath) { _ in }
            later.displayChangeHandler = { change in changes.withLock { $0.append(change) } }
            later.start(on: DispatchQueue(label: "later"))
            #expect(await eventually(timeout: 2) { changes.withLock { $0 } == [.waiting] })
            later.invalidate()
        }

        @Test func connectErrorsNameTheFix() {
            let path = "/run/vsyncd/vsyncd.sock"
            #expect(DisplayLinkConnection.error(forErrno: ENOENT, path: path) == .noDaemon(socketPath: path))
            #expect(DisplayLinkConnection.error(forErrno: ECONNREFUSED, path: path) == .noDaemon(socketPath: path))
            #expect(DisplayLinkConnection.error(forErrno: EACCES, path: path) == .permissionDenied(socketPath: path))
            #expect(DisplayLinkError.noDaemon(socketPath: path).description
                    == "no vsyncd at /run/vsyncd/vsyncd.sock: start it with 'systemctl start vsyncd.socket'")
            #expect(DisplayLinkError.permissionDenied(socketPath: path).description.contains("--filesystem=/run/vsyncd"))
            #expect(DisplayLinkConnection.resolvedPath("/tmp/x.sock") == "/tmp/x.sock")
        }

        @Test func linksShareOneConnection() async throws {
            let daemon = try DaemonProcess(hertz: 60, logLevel: "debug")
            defer { daemon.stop() }
            let recorders = (0..<4).map { _ in LinkRecorder() }
            let links = recorders.map { DisplayLink(socketPath: daemon.socketPath, handler: $0.handler()) }
            for (i, link) in links.enumerated() {
                link.preferredFramesPerSecond = [60, 30, 20, 15][i]
                link.start(on: DispatchQueue(label: "share\(i)"))
            }
            #expect(await eventually(timeout: 3) { recorders[3].count >= 5 })
            links.forEach { $0.invalidate() }
            // vsyncd's log: one handshake (the harness's own probe connection never says HELLO),
            // four subscriptions on it.
            #expect(await eventually(timeout: 2) { daemon.log.components(separatedBy: " on display ").count - 1 >= 4 })
            let log = daemon.log
            #expect(log.components(separatedBy: ": protocol ").count - 1 == 1, "handshakes in the log:\n\(log)")
            #expect(log.components(separatedBy: " on display ").count - 1 == 4, "subscriptions in the log:\n\(log)")
            for (i, r) in recorders.enumerated() {
                let last = try #require(r.all.last)
                let interval = Int64(last.frame.targetTimestampNanoseconds - last.frame.timestampNanoseconds)
                #expect(abs(interval - Int64(i + 1) * Int64(last.frame.durationNanoseconds)) <= 4, "link \(i): interval \(interval) ns")
            }
        }

        @Test func frameMonitorCountsRateDropsAndHitches() async throws {
            let daemon = try Self.daemon()
            defer { daemon.stop() }
            let reports = Mutex<[FrameMonitor.Report]>([])
            let hitches = Mutex<[FrameMonitor.Hitch]>([])
            let calls = Atomic<Int>(0)
            let monitor = FrameMonitor(
                socketPath: daemon.socketPath, window: 1, hitchThreshold: 0.05,
                work: { _ in
                    // One 120 ms stall in the second window (simulated work).
                    if calls.add(1, ordering: .relaxed).newValue == 90 { usleep(120_000) }
                },
                onReport: { report in reports.withLock { $0.append(report) } },
                onHitch: { hitch in hitches.withLock { $0.append(hitch) } })
            monitor.start(on: DispatchQueue(label: "monitor"))
            #expect(await eventually(timeout: 5) { reports.withLock { $0.count } >= 2 })
            monitor.invalidate()
            let (first, second) = reports.withLock { ($0[0], $0[1]) }
            // Bounds leave room for a busy machine's own stalls; the 120 ms one must show.
            #expect(first.framesPerSecond > 45 && first.framesPerSecond < 60.5, "first window: \(first)")
            #expect(first.frames + first.droppedFrames >= 58, "every frame is either called back or counted dropped")
            #expect(second.hitches >= 1, "second window: \(second)")
            #expect(second.droppedFrames >= 6)
            #expect(second.overruns >= 1)
            #expect(second.framesPerSecond < 56)
            let stall = hitches.withLock { $0.first { $0.duration > 0.1 } }
            #expect(stall.map { $0.duration < 0.25 && $0.droppedFrames >= 6 } == true, "hitches: \(hitches.withLock { $0 })")
            #expect(monitor.totals.frames >= 100)
        }
    }
}
