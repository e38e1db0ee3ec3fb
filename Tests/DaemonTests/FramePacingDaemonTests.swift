import DisplayLink
import Foundation
import Glibc
import Synchronization
import Testing
import VsyncCore

/// Frame pacing against the real vsyncd on its timer source, whose vblank times are exact: a
/// subscription with a work duration is woken before the vblank its frame is for, and told that
/// vblank exactly. (On vkms, in the VM test bed: FramePacingVMTests.)
@Suite("Frame pacing against vsyncd", .serialized)
struct FramePacingDaemonTests {
    static let hertz = 60.0
    static var periodNs: Double { 1e9 / hertz }

    /// Frames of subscription `id` until `count` came (or 10 s passed).
    static func frames(_ client: VsyncClient, _ count: Int, id: UInt32, answers: inout [Subscribed]) -> [ClientFrame] {
        var frames: [ClientFrame] = []
        let deadline = monotonicNowNs() + 10_000_000_000
        while frames.count < count && monotonicNowNs() < deadline {
            client.dispatch(timeoutMs: 100)
            while let event = client.nextEvent() {
                switch event {
                case .frame(let f) where f.subscriptionID == id: frames.append(f)
                case .subscribed(let s): answers.append(s)
                default: break
                }
            }
        }
        return frames
    }

    /// Each frame's target is a multiple of the divisor ahead of its newest vblank, its time is
    /// that vblank's exact time, and its timelines step by the divisor.
    static func checkTargets(_ frames: [ClientFrame], divisor: UInt64) {
        for f in frames {
            #expect(f.targetSequence % divisor == 0 && f.targetSequence > f.sequence, "target \(f.targetSequence) for vblank \(f.sequence)")
            let exact = Double(f.timestampNs) + Double(f.targetSequence - f.sequence) * periodNs
            #expect(abs(Double(f.targetTimestampNs) - exact) <= 2, "target \(f.targetTimestampNs), exact \(exact)")
            #expect(f.timelines.count == 4 && f.timelines.first == FrameTimeline(sequence: f.targetSequence, presentationNs: f.targetTimestampNs))
            for (a, b) in zip(f.timelines, f.timelines.dropFirst()) {
                #expect(b.sequence - a.sequence == divisor)
                #expect(abs(Double(b.presentationNs) - Double(a.presentationNs) - Double(divisor) * periodNs) <= 2)
            }
        }
        // Every frame at the rate is handed out once, or counted in skipped.
        for (a, b) in zip(frames, frames.dropFirst()) {
            #expect(b.targetSequence - a.targetSequence == divisor * (1 + UInt64(b.skipped)), "\(a.targetSequence) → \(b.targetSequence), skipped \(b.skipped)")
        }
    }

    static func medianLeadNs(_ frames: [ClientFrame]) -> Double {
        let leads = frames.map { Double(Int64(bitPattern: $0.targetTimestampNs &- $0.receivedNs)) }.sorted()
        return leads[leads.count / 2]
    }

    @Test(.timeLimit(.minutes(1)))
    func aWorkDurationWakesTheClientBeforeItsTargetAndNamesItExactly() throws {
        let daemon = try DaemonProcess(hertz: Self.hertz, logLevel: "warning")
        defer { daemon.stop() }
        let client = try VsyncClient(.init(socketPath: daemon.socketPath, clientName: "pacing"))
        #expect(client.connect(timeoutNs: 5_000_000_000) == nil)
        let w: UInt64 = 4_000_000
        let id = client.subscribe(.primary, range: FrameRateRange(preferredFramesPerSecond: 30), workDurationNs: w)
        var answers: [Subscribed] = []
        let first = Self.frames(client, 30, id: id, answers: &answers)
        #expect(first.count == 30)
        Self.checkTargets(first, divisor: 2)
        // Woken W before the target, less the wake-up's latency: the median lead is within W.
        let lead = Self.medianLeadNs(first)
        print("work duration 4 ms: median lead \(lead / 1e6) ms")
        #expect(lead > 0 && lead <= Double(w) + 100_000, "median lead \(lead) ns with W \(w)")
        // Woken between vblank s − 1 and s: the newest vblank is the odd one before each even
        // target (unless the wake-up ran over 4 ms late on a loaded machine: most, not all).
        #expect(first.filter { $0.sequence == $0.targetSequence - 1 }.count >= 20, "\(first.map { ($0.sequence, $0.targetSequence) })")

        // A longer work duration (over a frame), changed mid-stream: no frame twice, leads grow.
        client.setWorkDuration(id, 40_000_000)
        _ = Self.frames(client, 2, id: id, answers: &answers)  // the switch
        let second = Self.frames(client, 30, id: id, answers: &answers)
        Self.checkTargets(second, divisor: 2)
        let longLead = Self.medianLeadNs(second)
        print("work duration 40 ms: median lead \(longLead / 1e6) ms")
        #expect(longLead > 30_000_000 && longLead <= 40_100_000, "median lead \(longLead) ns with W 40 ms")
        #expect(answers.count >= 2 && answers.allSatisfy { $0.divisor == 2 })

        // Back to 0: ticks on the vblanks again, target = sequence + divisor.
        client.setWorkDuration(id, 0)
        _ = Self.frames(client, 3, id: id, answers: &answers)
        let third = Self.frames(client, 10, id: id, answers: &answers)
        #expect(third.allSatisfy { $0.sequence % 2 == 0 && $0.targetSequence == $0.sequence + 2 })
    }

    /// Page pacing (protocol 5): a page-only subscription with a work duration is woken by the
    /// client core's own timer, aimed from the timing page; the daemon sends it no tick. The
    /// frames are the daemon's paced frames: the same targets, exact times, leads within W, each
    /// frame once; and a daemon-paced subscription beside it names the same targets.
    @Test(.timeLimit(.minutes(1)))
    func aPageOnlyWorkDurationWakesFromTheClientsOwnTimer() throws {
        let daemon = try DaemonProcess(hertz: Self.hertz, logLevel: "warning")
        defer { daemon.stop() }
        let client = try VsyncClient(.init(socketPath: daemon.socketPath, clientName: "page-pacing"))
        #expect(client.connect(timeoutNs: 5_000_000_000) == nil)
        let w: UInt64 = 4_000_000
        let id = client.subscribe(.primary, range: FrameRateRange(preferredFramesPerSecond: 30), flags: .pageOnly, workDurationNs: w)
        var answers: [Subscribed] = []
        let frames = Self.frames(client, 30, id: id, answers: &answers)
        #expect(frames.count == 30)
        Self.checkTargets(frames, divisor: 2)
        let lead = Self.medianLeadNs(frames)
        print("page-paced, work duration 4 ms: median lead \(lead / 1e6) ms")
        #expect(lead > 0 && lead <= Double(w) + 100_000, "median lead \(lead) ns with W \(w)")
        #expect(frames.allSatisfy { $0.flags.contains(.synthetic) && $0.generation == answers.last?.display.generation })

        // Beside a daemon-paced subscription at the same rate: the same targets, at the same times.
        let paced = client.subscribe(.primary, range: FrameRateRange(preferredFramesPerSecond: 30), workDurationNs: w)
        // Until 10 frames are handed out on both paths: each path passes over the frames its
        // own wake-up was too late for on a busy machine (counted in skipped), and only frames
        // both handed out can be compared.
        var both: [ClientFrame] = []
        var fromDaemon: [UInt64: UInt64] = [:]
        var fromPage: [ClientFrame] = [], common: [ClientFrame] = []
        let deadline = monotonicNowNs() + 10_000_000_000
        while common.count < 10 && monotonicNowNs() < deadline {
            client.dispatch(timeoutMs: 100)
            while let event = client.nextEvent() { if case .frame(let f) = event { both.append(f) } }
            fromDaemon = Dictionary(both.filter { $0.subscriptionID == paced }.map { ($0.targetSequence, $0.targetTimestampNs) },
                                    uniquingKeysWith: { a, _ in a })
            fromPage = both.filter { $0.subscriptionID == id }
            common = fromPage.filter { fromDaemon[$0.targetSequence] != nil }
        }
        #expect(common.count >= 10, "\(fromPage.map(\.targetSequence)) vs \(fromDaemon.keys.sorted())")
        for f in common {
            #expect(abs(Double(f.targetTimestampNs) - Double(fromDaemon[f.targetSequence]!)) <= 2, "target \(f.targetSequence)")
        }
    }

    /// A program that waits in `dispatch(-1)` (libvsync's loop) with only a page-paced
    /// subscription, on a display nobody followed: the record has no period until the daemon's
    /// first vblanks, and no message will say when it has, so the core looks again by its own
    /// timer; the frames come without any other wake-up.
    @Test(.timeLimit(.minutes(1)))
    func aPagePacedSubscriptionAloneStartsInABlockingLoop() throws {
        let daemon = try DaemonProcess(hertz: Self.hertz, logLevel: "warning")
        defer { daemon.stop() }
        final class Loop: @unchecked Sendable {  // the client is the loop thread's alone until `done`
            let client: VsyncClient
            let id: UInt32
            let frames = Atomic<Int>(0)
            let stop = Atomic<Bool>(false)
            let done = DispatchSemaphore(value: 0)
            init(_ client: VsyncClient, _ id: UInt32) { self.client = client; self.id = id }
        }
        let client = try VsyncClient(.init(socketPath: daemon.socketPath, clientName: "page-blocking"))
        #expect(client.connect(timeoutNs: 5_000_000_000) == nil)
        let loop = Loop(client, client.subscribe(.primary, range: FrameRateRange(preferredFramesPerSecond: 60),
                                                 flags: .pageOnly, workDurationNs: 2_000_000))
        Thread.detachNewThread {
            while loop.frames.load(ordering: .relaxed) < 10 && !loop.stop.load(ordering: .relaxed) {
                loop.client.dispatch(timeoutMs: -1)
                while let event = loop.client.nextEvent() {
                    if case .frame(let f) = event, f.subscriptionID == loop.id { loop.frames.add(1, ordering: .relaxed) }
                }
            }
            loop.done.signal()
        }
        let finished = loop.done.wait(timeout: .now() + 10) == .success
        loop.stop.store(true, ordering: .relaxed)
        if !finished { _ = daemon.stop(); _ = loop.done.wait(timeout: .now() + 5) }  // ends the blocked read
        #expect(finished, "\(loop.frames.load(ordering: .relaxed)) page-paced frames in 10 s of dispatch(-1)")
    }

    /// A protocol 1 client is served as before: 72-byte ticks on multiples of its divisor, and
    /// SET_WORK_DURATION, a version 2 request, is an unknown type for it.
    @Test(.timeLimit(.minutes(1)))
    func aVersion1ClientGetsVersion1Ticks() throws {
        let daemon = try DaemonProcess(hertz: Self.hertz, logLevel: "warning")
        defer { daemon.stop() }
        let old = try RawClient(path: daemon.socketPath)
        #expect(try old.handshake(version: 1).version == 1)
        // Even with a work duration in the (longer) SUBSCRIBE, a version 1 connection is not paced.
        old.send(.subscribe(Subscribe(subscriptionID: 1, selector: .primary, range: FrameRateRange(preferredFramesPerSecond: 30), workDurationNs: 4_000_000)))
        var ticks: [Tick] = []
        while ticks.count < 5, let t = old.nextTick() {
            #expect(old.lastSize == Tick.version1WireSize)
            ticks.append(t)
        }
        #expect(ticks.count == 5)
        for t in ticks { #expect(t.sequence % 2 == 0 && t.targetSequence == t.sequence + 2) }
        old.send(.setWorkDuration(SetWorkDuration(subscriptionID: 1, workDurationNs: 1)))
        var sawUnknownType = false
        while case .message(let m) = old.receive() {
            if case .error(let e) = m, e.code == .unknownType { sawUnknownType = true }
        }
        #expect(sawUnknownType)

        let new = try RawClient(path: daemon.socketPath)
        #expect(try new.handshake(version: 2).version == 2)
        _ = try new.subscribe(1, fps: 60)
        #expect(new.nextTick() != nil && new.lastSize == Tick.wireSize)
    }

    /// A protocol 2 subscription to a display that is not there is kept, answered with display 0.
    @Test func aSubscriptionToAMissingConnectorWaitsAndCanBeEnded() throws {
        let daemon = try DaemonProcess(hertz: Self.hertz, logLevel: "warning")
        defer { daemon.stop() }
        let raw = try RawClient(path: daemon.socketPath)
        try raw.handshake(version: 2)
        let waiting = try raw.subscribe(7, fps: 30, selector: .connector("HDMI-A-9"))
        #expect(waiting.isWaiting && waiting.divisor == 0)
        raw.send(.setRate(SetRate(subscriptionID: 7, range: FrameRateRange(preferredFramesPerSecond: 20))))
        guard case .message(.subscribed(let again)) = raw.receive() else { Issue.record("no answer to SET_RATE"); return }
        #expect(again.isWaiting)
        raw.send(.subscribe(Subscribe(subscriptionID: 7, selector: .primary, range: .default)))
        guard case .message(.error(let duplicate)) = raw.receive() else { Issue.record("no ERROR"); return }
        #expect(duplicate.code == .duplicateSubscription)
        raw.send(.unsubscribe(subscriptionID: 7))
        raw.send(.unsubscribe(subscriptionID: 7))
        guard case .message(.error(let gone)) = raw.receive() else { Issue.record("no ERROR"); return }
        #expect(gone.code == .unknownSubscription)
        // CRTC ids name what exists: not kept.
        raw.send(.subscribe(Subscribe(subscriptionID: 8, selector: .crtc(999), range: .default)))
        guard case .message(.error(let unknown)) = raw.receive() else { Issue.record("no ERROR"); return }
        #expect(unknown.code == .unknownDisplay)
        // Version 1 clients get unknownDisplay, as before.
        let old = try RawClient(path: daemon.socketPath)
        try old.handshake(version: 1)
        old.send(.subscribe(Subscribe(subscriptionID: 1, selector: .connector("HDMI-A-9"), range: .default)))
        guard case .message(.error(let e)) = old.receive() else { Issue.record("no ERROR"); return }
        #expect(e.code == .unknownDisplay)
    }

    /// DisplayLink's face of it: `workDuration`, `targetSequence` and `frameTimelines`.
    @Test(.timeLimit(.minutes(1)))
    func displayLinkTakesAWorkDurationAndHandsOutTimelines() throws {
        let daemon = try DaemonProcess(hertz: Self.hertz, logLevel: "warning")
        defer { daemon.stop() }
        let frames = Mutex<[(DisplayLink.Frame, UInt64)]>([])
        let link = DisplayLink(socketPath: daemon.socketPath) { link in
            let entry = DisplayLink.currentTimeNanoseconds()
            if let f = link.currentFrame { frames.withLock { $0.append((f, entry)) } }
        }
        try link.setWorkDuration(.milliseconds(5))
        link.preferredFramesPerSecond = 30
        #expect(link.workDuration == .milliseconds(5))
        link.start()
        let deadline = monotonicNowNs() + 10_000_000_000
        while frames.withLock({ $0.count }) < 20 && monotonicNowNs() < deadline { usleep(20_000) }
        link.invalidate()
        let got = frames.withLock { $0 }
        #expect(got.count >= 20)
        for (f, _) in got {
            #expect(f.targetSequence % 2 == 0 && f.targetSequence > f.sequence)
            #expect(f.frameTimelines.count == 4)
            #expect(f.frameTimelines.first == FrameTimeline(sequence: f.targetSequence, presentationNs: f.targetTimestampNanoseconds))
        }
        let leads = got.map { Double(Int64(bitPattern: $0.0.targetTimestampNanoseconds &- $0.1)) }.sorted()
        let median = leads[leads.count / 2]
        print("DisplayLink, work duration 5 ms: median lead at the callback \(median / 1e6) ms")
        #expect(median > 0 && median <= 5_100_000)
    }
}
