@testable import DisplayLink
import Glibc
import Foundation
import Synchronization
import Testing

/// DisplayLink's own behaviour (delivery contexts, coalescing, lifetime, errors) against the
/// FAKE vsyncd in DisplayLinkFakeServer.swift. Rates, timestamps and reconnects against the real
/// daemon are in DisplayLinkDaemonTests.swift.
/// Every DisplayLink suite runs one test at a time: they measure timing on a 2-core machine.
@Suite(.serialized)
enum DisplayLinkTests {}

extension DisplayLinkTests {
    @Suite
    struct Library {
        @Test func queueDeliveryCarriesTheServersTimes() async throws {
            let server = try FakeVsyncd(hz: 60)
            defer { server.stop() }
            let recorder = LinkRecorder()
            let link = DisplayLink(socketPath: server.path, handler: recorder.handler())
            link.start(on: DispatchQueue(label: "test"))
            #expect(await eventually(timeout: 2) { recorder.count >= 20 })
            link.invalidate()
            let samples = recorder.all
            let period = server.periodNs
            for s in samples {
                #expect(s.frame.targetTimestampNanoseconds - s.frame.timestampNanoseconds == period)
                #expect(s.frame.durationNanoseconds == period)
                #expect(s.maximumFramesPerSecond == 60)
                #expect(s.frame.isSynthetic)
                // The callback runs after its vblank, and soon after on an idle machine.
                #expect(s.calledNs >= s.frame.timestampNanoseconds)
            }
            #expect(link.isSynthetic)
            #expect(abs(link.duration - 1.0 / 60) < 1e-6)
        }

        @Test func slowHandlerSkipsFramesWithoutBacklog() async throws {
            let server = try FakeVsyncd(hz: 60)
            defer { server.stop() }
            let recorder = LinkRecorder()
            let calls = Atomic<Int>(0)
            let link = DisplayLink(socketPath: server.path) { link in
                recorder.record(link)
                // The first five callbacks take 100 ms each: six frames' worth.
                if calls.add(1, ordering: .relaxed).newValue <= 5 { usleep(100_000) }
            }
            link.start(on: DispatchQueue(label: "slow"))
            #expect(await eventually(timeout: 3) { recorder.count >= 25 })
            link.invalidate()
            let samples = recorder.all
            // After each slow callback the next one skipped the frames it could not take…
            let skippedAfterSlow = samples[1...5].map(\.frame.skipped)
            // (100 ms is six frames; how they split between callbacks depends on the scheduler.)
            #expect(skippedAfterSlow.reduce(0, +) >= 20 && skippedAfterSlow.allSatisfy { $0 >= 2 },
                    "skipped after slow callbacks: \(skippedAfterSlow)")
            // …and carried a recent tick, not a queued old one: a backlog behind 0.5 s of slow
            // callbacks would make most later callbacks run hundreds of ms after their vblank.
            let ages = samples[6...].map { Double($0.calledNs - $0.frame.timestampNanoseconds) / 1e6 }.sorted()
            #expect(ages[ages.count * 9 / 10] < 40, "callback ages after the slow phase (ms): \(ages)")
            // Sequences account for every frame: each gap is the skipped count plus one.
            for (a, b) in zip(samples, samples.dropFirst()) {
                #expect(b.frame.sequence - a.frame.sequence == UInt64(b.frame.skipped + 1))
            }
        }

        @Test func pauseStopsCallbacksAndResumeRestarts() async throws {
            let server = try FakeVsyncd(hz: 60)
            defer { server.stop() }
            let recorder = LinkRecorder()
            let link = DisplayLink(socketPath: server.path, handler: recorder.handler())
            link.start(on: DispatchQueue(label: "pause"))
            #expect(await eventually(timeout: 2) { recorder.count >= 5 })
            link.isPaused = true
            #expect(link.isPaused)
            await sleep(seconds: 0.1)  // ticks already in flight may land
            let paused = recorder.count
            await sleep(seconds: 0.4)
            #expect(recorder.count == paused, "callbacks while paused")
            link.isPaused = false
            #expect(await eventually(timeout: 1) { recorder.count >= paused + 5 })
            link.invalidate()
        }

        @Test func invalidateIsIdempotentThreadSafeAndFinal() async throws {
            let server = try FakeVsyncd(hz: 60)
            defer { server.stop() }
            let recorder = LinkRecorder()
            let link = DisplayLink(socketPath: server.path, handler: recorder.handler())
            link.start(on: DispatchQueue(label: "inv"))
            #expect(await eventually(timeout: 2) { recorder.count >= 3 })
            DispatchQueue.concurrentPerform(iterations: 8) { _ in link.invalidate() }
            link.invalidate()
            #expect(!link.isValid)
            await sleep(seconds: 0.05)
            let after = recorder.count
            await sleep(seconds: 0.3)
            #expect(recorder.count == after)
            // Scheduling an invalidated link does nothing.
            link.start(on: DispatchQueue(label: "again"))
            await sleep(seconds: 0.2)
            #expect(recorder.count == after)
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
            let server = try FakeVsyncd(hz: 60)
            defer { server.stop() }
            weak var weakController: Controller?
            weak var weakLink: DisplayLink?
            do {
                let controller = Controller(socketPath: server.path)
                weakController = controller
                weakLink = controller.link
                #expect(await eventually(timeout: 2) { controller.ticks.load(ordering: .relaxed) >= 3 })
            }
            #expect(weakController == nil, "the link kept its owner alive")
            // The orphaned link notices at its next frame, invalidates itself and is released.
            #expect(await eventually(timeout: 1) { weakLink == nil })
        }

        @Test func runLoopModes() async throws {
            let server = try FakeVsyncd(hz: 60)
            defer { server.stop() }
            let tracking = RunLoop.Mode("DisplayLinkTracking")
            let inDefault = LinkRecorder()
            let inCommon = LinkRecorder()
            let inBoth = LinkRecorder()
            let links = [
                DisplayLink(socketPath: server.path, handler: inDefault.handler()),
                DisplayLink(socketPath: server.path, handler: inCommon.handler()),
                DisplayLink(socketPath: server.path, handler: inBoth.handler()),
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
            let server = try FakeVsyncd(hz: 60)
            defer { server.stop() }
            let recorder = LinkRecorder()
            let link = DisplayLink(socketPath: server.path, handler: recorder.handler())
            let thread = RunLoopThread(setup: { runLoop in
                link.add(to: runLoop, forMode: .default)
                // Removed after 0.3 s, from the run loop's own thread.
                runLoop.add(Timer(fire: Date(timeIntervalSinceNow: 0.3), interval: 0, repeats: false) { _ in
                    link.remove(from: RunLoop.current, forMode: .default)
                }, forMode: .default)
            }, schedule: [(.default, 0.8)])
            await thread.waitUntilFinished()
            let samples = recorder.all
            #expect(samples.count >= 5 && samples.count <= 25, "\(samples.count) callbacks in 0.3 s")
            #expect(link.isValid)
            link.invalidate()
        }

        @Test func asyncFramesSkipWhenSlowAndEndOnInvalidate() async throws {
            let server = try FakeVsyncd(hz: 60)
            defer { server.stop() }
            let link = DisplayLink(socketPath: server.path) { _ in }
            var frames: [DisplayLink.Frame] = []
            for await frame in link.frames {
                frames.append(frame)
                if frames.count == 3 { try await Task.sleep(nanoseconds: 100_000_000) }
                if frames.count == 10 { link.invalidate() }
            }
            #expect(frames.count == 10, "the stream ends on invalidate")
            let steps = zip(frames, frames.dropFirst()).map { $1.sequence - $0.sequence }
            #expect(steps.allSatisfy { $0 >= 1 })
            #expect(steps[2] >= 5, "a slow consumer skips frames: steps \(steps)")
            let now = DisplayLink.currentTimeNanoseconds()
            #expect(now - frames[3].timestampNanoseconds < 300_000_000)
        }

        @Test func noDaemonIsReportedAtOnce() async throws {
            let path = FakeVsyncd.temporarySocketPath()
            let recorder = LinkRecorder()
            let link = DisplayLink(socketPath: path, handler: recorder.handler())
            link.errorHandler = recorder.errorHandler()
            let started = DisplayLink.currentTime()
            link.start(on: DispatchQueue(label: "nodaemon"))
            #expect(DisplayLink.currentTime() - started < 0.05, "start must not block")
            #expect(await eventually(timeout: 1) { !recorder.errors.withLock { $0.isEmpty } })
            let errors = recorder.errors.withLock { $0 }
            #expect(errors.first == .noDaemon(socketPath: path))
            #expect(errors.first?.description.contains("no vsyncd at \(path)") == true)
            // Reported once, not on every retry.
            await sleep(seconds: 0.6)
            #expect(recorder.errors.withLock { $0.count } == 1)
            // And the link starts ticking by itself once a daemon appears.
            let server = try FakeVsyncd(hz: 60, path: path)
            defer { server.stop() }
            #expect(await eventually(timeout: 1.5) { recorder.count >= 3 })
            link.invalidate()
        }

        @Test func reconnectsAndResubscribesAfterRestart() async throws {
            let server = try FakeVsyncd(hz: 60)
            defer { server.stop() }
            let recorder = LinkRecorder()
            let link = DisplayLink(socketPath: server.path, handler: recorder.handler())
            link.errorHandler = recorder.errorHandler()
            link.preferredFramesPerSecond = 30
            link.start(on: DispatchQueue(label: "reconnect"))
            #expect(await eventually(timeout: 2) { recorder.count >= 5 })
            server.stop()
            #expect(await eventually(timeout: 1) { recorder.errors.withLock { $0.contains(.connectionLost(socketPath: server.path)) } })
            await sleep(seconds: 0.7)
            let before = recorder.count
            try server.start()
            let restarted = DisplayLink.currentTime()
            #expect(await eventually(timeout: 1.5) { recorder.count > before })
            #expect(DisplayLink.currentTime() - restarted < 1.0, "ticks resumed more than 1 s after the daemon came back")
            #expect(server.connections == 2)
            // Re-subscribed at the current rate: 30 of 60 Hz means every other vblank.
            await sleep(seconds: 0.2)
            let last = recorder.all.suffix(3)
            for s in last { #expect(s.frame.targetTimestampNanoseconds - s.frame.timestampNanoseconds == 2 * server.periodNs) }
            link.invalidate()
        }

        @Test func displayGoneAndDisplayNotFoundAreErrors() async throws {
            let server = try FakeVsyncd(hz: 60)
            defer { server.stop() }
            let recorder = LinkRecorder()
            let link = DisplayLink(socketPath: server.path, handler: recorder.handler())
            link.errorHandler = recorder.errorHandler()
            link.start(on: DispatchQueue(label: "gone"))
            #expect(await eventually(timeout: 2) { recorder.count >= 2 })
            server.removeDisplay()
            #expect(await eventually(timeout: 1) { recorder.errors.withLock { $0.contains(.displayGone(name: "timer")) } })
            link.invalidate()

            server.refuseDisplays = true
            let missing = LinkRecorder()
            let other = DisplayLink(display: .connector("HDMI-A-9"), socketPath: server.path, handler: missing.handler())
            other.errorHandler = missing.errorHandler()
            other.start(on: DispatchQueue(label: "missing"))
            #expect(await eventually(timeout: 1) { !missing.errors.withLock { $0.isEmpty } })
            let error = missing.errors.withLock { $0.first }
            #expect(error == .displayNotFound(selector: "'HDMI-A-9'", reason: "no display matches"))
            #expect(error?.description.contains("vsync-probe list") == true)
            #expect(missing.count == 0)
            other.invalidate()
        }

        @Test func displayChangesReachTheHandlerAndProperties() async throws {
            let server = try FakeVsyncd(hz: 60)
            defer { server.stop() }
            let recorder = LinkRecorder()
            let changes = Mutex<[DisplayLink.DisplayChange]>([])
            let link = DisplayLink(socketPath: server.path, handler: recorder.handler())
            link.displayChangeHandler = { change in changes.withLock { $0.append(change) } }
            link.start(on: DispatchQueue(label: "change"))
            #expect(await eventually(timeout: 2) { recorder.count >= 2 })
            #expect(link.maximumFramesPerSecond == 60)
            server.sendEvent(.modeChanged, hz: 120)
            server.sendEvent(.off, hz: 120)
            server.sendEvent(.on, hz: 120)
            #expect(await eventually(timeout: 1) { changes.withLock { $0.count } == 3 })
            #expect(changes.withLock { $0 } == [.modeChanged(refreshHz: 120), .off, .on])
            #expect(link.maximumFramesPerSecond == 120)
            link.invalidate()
        }

        @Test func connectErrorsNameTheFix() {
            let path = "/run/vsyncd/vsyncd.sock"
            #expect(DisplayLinkConnection.error(forErrno: ENOENT, path: path) == .noDaemon(socketPath: path))
            #expect(DisplayLinkConnection.error(forErrno: ECONNREFUSED, path: path) == .noDaemon(socketPath: path))
            #expect(DisplayLinkConnection.error(forErrno: EACCES, path: path) == .permissionDenied(socketPath: path))
            #expect(DisplayLinkError.noDaemon(socketPath: path).description
                    == "no vsyncd at /run/vsyncd/vsyncd.sock: start it with 'systemctl start vsyncd.socket'")
            #expect(DisplayLinkError.permissionDenied(socketPath: path).description.contains("add the user to group 'video'"))
            #expect(DisplayLinkConnection.resolvedPath("/tmp/x.sock") == "/tmp/x.sock")
        }

        @Test func linksShareOneConnection() async throws {
            let server = try FakeVsyncd(hz: 60)
            defer { server.stop() }
            let recorders = (0..<4).map { _ in LinkRecorder() }
            let links = recorders.map { DisplayLink(socketPath: server.path, handler: $0.handler()) }
            for (i, link) in links.enumerated() {
                link.preferredFramesPerSecond = [60, 30, 20, 15][i]
                link.start(on: DispatchQueue(label: "share\(i)"))
            }
            #expect(await eventually(timeout: 2) { recorders[3].count >= 5 })
            links.forEach { $0.invalidate() }
            #expect(server.connections == 1)
            #expect(server.subscribes == 4)
            for (i, r) in recorders.enumerated() {
                let interval = r.all.last.map { $0.frame.targetTimestampNanoseconds - $0.frame.timestampNanoseconds }
                #expect(interval == UInt64(i + 1) * server.periodNs)
            }
        }

        @Test func frameMonitorCountsRateDropsAndHitches() async throws {
            let server = try FakeVsyncd(hz: 60)
            defer { server.stop() }
            let reports = Mutex<[FrameMonitor.Report]>([])
            let hitches = Mutex<[FrameMonitor.Hitch]>([])
            let calls = Atomic<Int>(0)
            let monitor = FrameMonitor(
                socketPath: server.path, window: 1, hitchThreshold: 0.05,
                work: { _ in
                    // One 120 ms stall in the second window.
                    if calls.add(1, ordering: .relaxed).newValue == 90 { usleep(120_000) }
                },
                onReport: { report in reports.withLock { $0.append(report) } },
                onHitch: { hitch in hitches.withLock { $0.append(hitch) } })
            monitor.start(on: DispatchQueue(label: "monitor"))
            #expect(await eventually(timeout: 3.5) { reports.withLock { $0.count } >= 2 })
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
