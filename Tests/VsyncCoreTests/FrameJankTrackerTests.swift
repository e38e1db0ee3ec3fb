import Testing

@testable import VsyncCore

/// FrameJankTracker's rules, tick after tick, on a display with a 16 ms period (vblank n at
/// n × 16 ms) and a link at its full rate.
@Suite("Frame jank tracker")
struct FrameJankTrackerTests {
    static let ms: UInt64 = 1_000_000
    static let period: UInt64 = 16 * ms

    /// The tick of vblank `seq` for vblank `seq + 1`, begun `start` ms and ended `end` ms after it.
    static func tick(
        _ seq: UInt64, start: Double = 0.5, end: Double = 2, vblankOffMs: Double = 0, workDuration: UInt64 = 0,
        flags: TickFlags = [], generation: UInt32 = 1
    ) -> FrameTick {
        let vblank = UInt64(Double(seq * period) + vblankOffMs * 1e6)
        let target = seq + 1  // paced or not, aimed at the next vblank
        return FrameTick(
            sequence: seq, timestampNs: vblank, targetSequence: target, targetTimestampNs: target * period,
            periodNs: period, workDurationNs: workDuration, flags: flags, generation: generation,
            startNs: vblank + UInt64(start * 1e6), endNs: vblank + UInt64(end * 1e6))
    }

    static func reasons(_ ticks: [FrameTick]) -> [FrameJankReason] {
        var tracker = FrameJankTracker()
        return ticks.map { tracker.frame($0).jank.reason }
    }

    @Test func ticksHandledInTimeAreOnTime() {
        var tracker = FrameJankTracker()
        let (facts, jank) = tracker.frame(Self.tick(10))
        #expect(jank.reason == .onTime)
        #expect(facts.dueNs == 10 * Self.period && facts.predictedPresentNs == 11 * Self.period)
        #expect(facts.presentNs == 11 * Self.period)
        #expect(tracker.frame(Self.tick(11)).jank.reason == .onTime)
    }

    @Test func workEndingPastTheTargetIsTheAppsDeadline() {
        #expect(Self.reasons([Self.tick(10), Self.tick(11, end: 17)]) == [.onTime, .appDeadlineMissed])
    }

    /// Ticks held back while the app was idle (a stopped daemon): the next tick judges the
    /// first frame owed, due at the vblank it should have followed.
    @Test func aTickHeldBackWhileTheAppWasIdleIsDeliveryLate() {
        var tracker = FrameJankTracker()
        _ = tracker.frame(Self.tick(10))
        let (facts, jank) = tracker.frame(Self.tick(14))
        #expect(jank.reason == .deliveryLate)
        #expect(facts.dueNs == 11 * Self.period && facts.predictedPresentNs == 12 * Self.period)
        #expect(facts.presentNs == 15 * Self.period)
    }

    /// Frames skipped because the app's previous frame ran long are that frame's overrun,
    /// counted once: the next tick is judged on its own.
    @Test func aSkipAfterTheAppsOwnOverrunIsCountedOnce() {
        let overran = Self.tick(10, end: 50)
        let next = Self.tick(13, start: 2, end: 3)
        #expect(Self.reasons([overran, next]) == [.appDeadlineMissed, .onTime])
    }

    /// A paced tick is due at its commit point, target − work duration.
    @Test func aPacedTickLateForItsCommitPointIsDeliveryLateElseTheApps() {
        let w = 8 * Self.ms
        // Woken at vblank 10 + 8 ms: due at 11 − 8 ms; begun 7 ms past it, 2 ms of work.
        let late = Self.tick(10, start: 15, end: 17, workDuration: w)
        let (facts, jank) = {
            var t = FrameJankTracker()
            return t.frame(late)
        }()
        #expect(facts.dueNs == 11 * Self.period - w)
        #expect(jank.reason == .deliveryLate)
        // Begun 1 ms past the commit point (within the start threshold), ended past the target.
        let own = Self.tick(10, start: 9, end: 17, workDuration: w)
        #expect(Self.reasons([own]) == [.appDeadlineMissed])
    }

    @Test func aVBlankOffItsPredictionIsAPredictionError() {
        #expect(Self.reasons([Self.tick(10), Self.tick(11, vblankOffMs: 3)]) == [.onTime, .predictionError])
        #expect(Self.reasons([Self.tick(10), Self.tick(11, vblankOffMs: 1.5)]) == [.onTime, .onTime])
    }

    @Test func theDisplaysStateComesFirst() {
        #expect(Self.reasons([Self.tick(10), Self.tick(11, generation: 2)]) == [.onTime, .modeChange])
        #expect(Self.reasons([Self.tick(10, flags: .predicted)]) == [.predictedWhileOff])
        // The first tick has no previous generation to differ from.
        #expect(Self.reasons([Self.tick(10, generation: 7)]) == [.onTime])
    }

    @Test func aResetForgetsThePreviousTick() {
        var tracker = FrameJankTracker()
        _ = tracker.frame(Self.tick(10))
        tracker.reset()
        #expect(tracker.frame(Self.tick(14)).jank.reason == .onTime)
    }
}
