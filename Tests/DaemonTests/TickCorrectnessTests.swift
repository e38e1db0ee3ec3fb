import Foundation
import Glibc
import Testing
import VsyncCore
@testable import VsyncDaemon

/// Three bugs clients written by others found, each reproduced the way they hit it,
/// with the client's timing driven by the test (a request sent the moment a tick arrives, a
/// subscribe aimed at a point in the vblank grid), not by sleeps alone.
extension VsyncdTests {
    @Suite("Tick correctness", .serialized) struct TickCorrectness {
        static let hertz = 60.0
        static var periodNs: Double { 1e9 / hertz }

        static func ticks(_ messages: [ServerMessage]) -> [Tick] {
            messages.compactMap { if case .tick(let t) = $0 { t } else { nil } }
        }

        /// Every frame at the rate is handed out once, in order, or counted in `skipped`.
        static func expectEachFrameOnce(_ ticks: [Tick], divisor: UInt64, _ context: String) {
            for (a, b) in zip(ticks, ticks.dropFirst()) {
                #expect(b.targetSequence > a.targetSequence, "\(context): target \(b.targetSequence) handed out after \(a.targetSequence)")
                if b.targetSequence > a.targetSequence {
                    #expect(b.targetSequence - a.targetSequence == divisor * (1 + UInt64(b.skipped)),
                            "\(context): \(a.targetSequence) → \(b.targetSequence), skipped \(b.skipped)")
                }
            }
        }

        /// Bug 1: a work duration set right after a tick on a vblank must not hand out that
        /// tick's target again; and the other way, a work duration longer than the frames
        /// between set back to 0 must not make the vblank path repeat a frame a wake-up handed out.
        @Test(.timeLimit(.minutes(1)))
        func aWorkDurationChangeNeverHandsOutAFrameTwice() throws {
            let daemon = try DaemonProcess(hertz: Self.hertz, logLevel: "warning")
            defer { daemon.stop() }
            let client = try RawClient(path: daemon.socketPath)
            try client.handshake(version: 2)
            _ = try client.subscribe(1, fps: 30)
            for trial in 1...3 {
                // W 0 → 4 ms, sent the moment a tick on a vblank arrives (its target 29 ms ahead).
                guard let onVBlank = client.nextTick() else { Issue.record("no tick"); return }
                #expect(onVBlank.targetSequence == onVBlank.sequence + 2)
                client.send(.setWorkDuration(SetWorkDuration(subscriptionID: 1, workDurationNs: 4_000_000)))
                var got = [onVBlank] + Self.ticks(client.messages(timeout: 0.5) { _ in false })
                Self.expectEachFrameOnce(got, divisor: 2, "trial \(trial), W 0 → 4 ms")
                #expect(got.dropFirst().contains { $0.sequence == $0.targetSequence - 1 }, "no paced tick after W was set")

                // W 40 ms (2.4 frames) → 0, sent the moment a paced tick arrives: its target is
                // the even vblank after the next, which the vblank path would target too.
                client.send(.setWorkDuration(SetWorkDuration(subscriptionID: 1, workDurationNs: 40_000_000)))
                got = Self.ticks(client.messages(timeout: 0.5) { _ in false })
                guard let paced = client.nextTick() else { Issue.record("no paced tick"); return }
                client.send(.setWorkDuration(SetWorkDuration(subscriptionID: 1, workDurationNs: 0)))
                got = [paced] + Self.ticks(client.messages(timeout: 0.5) { _ in false })
                Self.expectEachFrameOnce(got, divisor: 2, "trial \(trial), W 40 ms → 0")
                #expect(got.last.map { $0.targetSequence == $0.sequence + 2 } ?? false, "ticks on vblanks again")
            }
        }

        /// Bug 2: after an idle spell, a paced subscription's first tick must name the newest
        /// real vblank, not the last one seen before the display went idle.
        @Test(.timeLimit(.minutes(1)))
        func theFirstPacedTickAfterIdleNamesTheNewestVBlank() throws {
            let daemon = try DaemonProcess(hertz: Self.hertz, logLevel: "warning")
            defer { daemon.stop() }
            let client = try RawClient(path: daemon.socketPath)
            try client.handshake(version: 2)
            for trial in 1...3 {
                // The timer source's grid, from a few ticks.
                _ = try client.subscribe(1, fps: 60)
                guard let anchor = client.nextTick() else { Issue.record("no tick"); return }
                client.send(.unsubscribe(subscriptionID: 1))
                _ = client.messages(timeout: 0.3) { _ in false }  // 300 ms idle: vblank events off

                // Subscribe 2 ms after a vblank, with W = 10 ms.
                let now = monotonicNowNs()
                let elapsed = Double(now - anchor.timestampNs) / Self.periodNs
                let nextVBlank = anchor.timestampNs + UInt64(((elapsed.rounded(.down) + 1) * Self.periodNs).rounded())
                var at = timespec(tv_sec: Int((nextVBlank + 2_000_000) / 1_000_000_000), tv_nsec: Int((nextVBlank + 2_000_000) % 1_000_000_000))
                clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, nil)
                let subscribedAt = monotonicNowNs()
                client.send(.subscribe(Subscribe(subscriptionID: 1, selector: .primary, range: FrameRateRange(preferredFramesPerSecond: 60), workDurationNs: 10_000_000)))
                guard let first = client.nextTick() else { Issue.record("no paced tick"); return }
                let newestAtSubscribe = anchor.sequence + UInt64((Double(subscribedAt - anchor.timestampNs) / Self.periodNs).rounded(.down))
                #expect(first.sequence >= newestAtSubscribe,
                        "trial \(trial): first paced tick names vblank \(first.sequence), but \(newestAtSubscribe) had happened before the SUBSCRIBE")
                #expect(first.sequence < first.targetSequence)
                let exact = Double(anchor.timestampNs) + Double(first.sequence - anchor.sequence) * Self.periodNs
                #expect(abs(Double(first.timestampNs) - exact) <= 2, "its timestamp is that vblank's")
                client.send(.unsubscribe(subscriptionID: 1))
                _ = client.messages(timeout: 0.1) { _ in false }
            }
        }

        /// Bug 3: a compositor's mode set. The daemon re-reads the CRTC and sees the new mode
        /// (a nonblocking commit makes it readable at once), then reads the old mode's last
        /// event, which the kernel flushes when it turns the CRTC off for the mode set. That
        /// vblank is ticked once, and does not seed the new mode's model.
        @Test(.timeLimit(.minutes(1)))
        func aVBlankFlushedByAModeSetIsTickedOnce() throws {
            typealias Changes = DisplayChanges
            let source = ScriptedVBlankSource(displays: [Changes.virtual1(hz: 60)])
            let daemon = try InProcessDaemon(source: source)
            defer { daemon.stop() }
            let client = try RawClient(path: daemon.socketPath)
            try client.handshake(version: 2)
            _ = try client.subscribe(1, fps: 60)
            let start = monotonicNowNs()
            let lastOld = Changes.vblanks(source, 830...837, hz: 60, start: start) - UInt64((Self.periodNs).rounded())
            let before = Self.ticks(client.messages { if case .tick(let t) = $0 { t.sequence == 837 } else { false } })
            #expect(before.last?.sequence == 837 && before.last?.timestampNs == lastOld)

            // The new mode is readable; the daemon's once-a-second re-read finds it.
            source.update { $0[0] = Changes.virtual1(hz: 75) }
            let change = client.messages { if case .displayEvent(let e) = $0 { e.kind == .modeChanged } else { false } }
            #expect(change.contains { if case .displayEvent(let e) = $0 { e.kind == .modeChanged } else { false } })
            // Then the flushed event (837 again, its time), and the new mode's vblanks.
            source.push([.vblank(Changes.key, sequence: 837, timestampNs: lastOld)])
            let newStart = lastOld + 50_000_000
            _ = Changes.vblanks(source, 841...850, hz: 75, start: newStart)
            let after = Self.ticks(client.messages { if case .tick(let t) = $0 { t.sequence == 850 } else { false } })
            #expect(after.map(\.sequence) == Array(841...850), "\(after.map(\.sequence))")
            let newPeriod = 1e9 / 75
            for t in after {
                let truth = Double(newStart) + Double(t.sequence - 841 + 1) * newPeriod
                #expect(abs(Double(t.targetTimestampNs) - truth) < 1_000, "target of \(t.sequence) off by \((Double(t.targetTimestampNs) - truth) / 1e6) ms")
                #expect(abs(Double(t.displayIntervalNs) - newPeriod) < 1_000)
            }
        }
    }
}
