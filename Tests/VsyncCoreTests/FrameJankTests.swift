import Testing

@testable import VsyncCore

/// Each reason a frame can be late, and each threshold's edge (FrameTimeline's: present
/// 2 ms, deadline 0, start 2 ms), on a 60 Hz display with a 4 ms work duration.
@Suite("Frame jank")
struct FrameJankTests {
    static let ms: UInt64 = 1_000_000
    static let period: UInt64 = 16_666_667
    static let target: UInt64 = 1_000 * ms
    static let work: UInt64 = 4 * ms
    static let due = target - work

    /// A frame whose tick left and arrived on time and whose work took 1 ms.
    static func facts(
        sent: UInt64? = due, received: UInt64 = due + 100_000, ended: UInt64? = nil,
        present: UInt64? = target, display: FrameDisplayState = .on
    ) -> FrameFacts {
        FrameFacts(
            predictedPresentNs: target, periodNs: period, dueNs: due, sentNs: sent, receivedNs: received,
            workEndedNs: ended ?? received + ms, presentNs: present, display: display)
    }

    static func reason(_ f: FrameFacts) -> FrameJankReason { FrameJank.classify(f).reason }

    @Test func onTimeWithinTwoMillisecondsEitherWay() {
        let exact = FrameJank.classify(Self.facts())
        #expect(exact == FrameJank(reason: .onTime, presentType: .onTime, onTimeFinish: true, presentDelayNs: 0))
        #expect(!exact.isLate)
        #expect(Self.reason(Self.facts(present: Self.target + 2 * Self.ms)) == .onTime)
        #expect(Self.reason(Self.facts(present: Self.target - 2 * Self.ms)) == .onTime)
        let late = FrameJank.classify(Self.facts(present: Self.target + 2 * Self.ms + 1))
        #expect(late.presentType == .late && late.reason == .predictionError && late.presentDelayNs == Int64(2 * Self.ms + 1))
        let early = FrameJank.classify(Self.facts(present: Self.target - 2 * Self.ms - 1))
        #expect(early.presentType == .early && early.reason == .predictionError && early.presentDelayNs == -Int64(2 * Self.ms + 1))
    }

    @Test func appDeadlineMissedWhenItsOwnWorkOverranOnAnOnTimeTick() {
        let f = Self.facts(ended: Self.target + 5 * Self.ms, present: Self.target + Self.period)
        let jank = FrameJank.classify(f)
        #expect(jank.reason == .appDeadlineMissed && !jank.onTimeFinish && jank.presentType == .late)
        // The deadline's edge: ending at the predicted present is on time (threshold 0), so a
        // late present then is not the app's; one nanosecond later it is.
        #expect(Self.reason(Self.facts(ended: Self.target, present: Self.target + Self.period)) == .presentScheduling)
        #expect(Self.reason(Self.facts(ended: Self.target + 1, present: Self.target + Self.period)) == .appDeadlineMissed)
    }

    @Test func lateDeliveryIsTheDaemonsWhenItSentLateElseTheSchedulers() {
        // Received 3 ms late; the 1 ms of work fits in the 4 ms it had, so the delivery made it miss.
        let lateReceipt = Self.due + 3 * Self.ms
        let ended = lateReceipt + 3_500_000
        #expect(
            Self.reason(Self.facts(sent: Self.due + 3 * Self.ms, received: lateReceipt, ended: ended, present: Self.target + Self.period))
                == .daemonLate)
        #expect(
            Self.reason(Self.facts(sent: Self.due + 10_000, received: lateReceipt, ended: ended, present: Self.target + Self.period))
                == .deliveryLate)
        #expect(
            Self.reason(Self.facts(sent: nil, received: lateReceipt, ended: ended, present: Self.target + Self.period)) == .deliveryLate,
            "without the send time, late delivery is the scheduler's")
        // The daemon's edge: 2 ms past due is still on time for the send.
        #expect(
            Self.reason(Self.facts(sent: Self.due + 2 * Self.ms, received: lateReceipt, ended: ended, present: Self.target + Self.period))
                == .deliveryLate)
        #expect(
            Self.reason(
                Self.facts(sent: Self.due + 2 * Self.ms + 1, received: lateReceipt, ended: ended, present: Self.target + Self.period))
                == .daemonLate)
        // The receipt's edge: 2 ms late is on time, so the overrun is the app's.
        let onEdge = Self.due + 2 * Self.ms
        #expect(Self.reason(Self.facts(received: onEdge, ended: Self.target + 1, present: Self.target + Self.period)) == .appDeadlineMissed)
        #expect(Self.reason(Self.facts(received: onEdge + 1, ended: Self.target + 1, present: Self.target + Self.period)) == .deliveryLate)
    }

    @Test func workLongerThanTheBudgetIsTheAppsEvenWhenTheTickWasLate() {
        let lateReceipt = Self.due + 3 * Self.ms
        // Exactly the 4 ms budget after a late receipt: delivery's fault; one ns more: the app's.
        #expect(
            Self.reason(
                Self.facts(sent: Self.due, received: lateReceipt, ended: lateReceipt + Self.work, present: Self.target + Self.period))
                == .deliveryLate)
        #expect(
            Self.reason(
                Self.facts(sent: Self.due, received: lateReceipt, ended: lateReceipt + Self.work + 1, present: Self.target + Self.period))
                == .appDeadlineMissed)
    }

    @Test func onTimeFinishPresentedWholeVsyncsOffIsSchedulingElsePredictionError() {
        let p = Self.period
        let ms = Self.ms
        let t = Self.target
        #expect(Self.reason(Self.facts(present: t + p)) == .presentScheduling)
        #expect(Self.reason(Self.facts(present: t + 2 * p)) == .presentScheduling)
        #expect(Self.reason(Self.facts(present: t + p / 2)) == .predictionError)
        // The whole-vsync rule's edges: within 2 ms of a multiple, either side.
        #expect(Self.reason(Self.facts(present: t + p + 2 * ms - 1)) == .presentScheduling)
        #expect(Self.reason(Self.facts(present: t + p + 2 * ms)) == .predictionError)
        #expect(Self.reason(Self.facts(present: t + 2 * p - 2 * ms)) == .presentScheduling)
        #expect(Self.reason(Self.facts(present: t + 2 * p - 2 * ms - 1)) == .predictionError)
        // Early by a whole vsync, or by a fraction.
        let early = FrameJank.classify(Self.facts(present: t - p))
        #expect(early.reason == .presentScheduling && early.presentType == .early)
        #expect(Self.reason(Self.facts(present: t - p / 2)) == .predictionError)
        // No period: no multiple of it either.
        var noPeriod = Self.facts(present: t + p)
        noPeriod.periodNs = 0
        #expect(Self.reason(noPeriod) == .predictionError)
    }

    @Test func finishedLateButPresentedEarlyOrPresentUnknownIsUnknown() {
        let early = FrameJank.classify(Self.facts(ended: Self.target + 1, present: Self.target - Self.period))
        #expect(early.reason == .unknown && early.presentType == .early)
        let notKnown = FrameJank.classify(Self.facts(present: nil))
        #expect(notKnown.reason == .unknown && notKnown.presentType == .unknown && notKnown.presentDelayNs == 0)
    }

    @Test func variableRefreshWaitIsTheDisplaysButAnOverrunStillTheApps() {
        let v = FrameJank.classify(Self.facts(present: Self.target + 5 * Self.ms, display: .variable))
        #expect(v.reason == .variableRefresh && v.presentType == .late && v.onTimeFinish)
        #expect(
            Self.reason(Self.facts(ended: Self.target + 3 * Self.ms, present: Self.target + 5 * Self.ms, display: .variable))
                == .appDeadlineMissed)
        #expect(Self.reason(Self.facts(present: Self.target + Self.ms, display: .variable)) == .onTime)
    }

    @Test func theDisplaysStateComesFirst() {
        let off = FrameJank.classify(Self.facts(present: nil, display: .off))
        #expect(off.reason == .displayOff && off.presentType == .unknown && off.predictionType == .unknown)
        let predicted = FrameJank.classify(Self.facts(present: Self.target, display: .predictedWhileOff))
        #expect(predicted.reason == .predictedWhileOff && predicted.predictionType == .expired && predicted.presentType == .unknown)
        let mode = FrameJank.classify(
            Self.facts(ended: Self.target + 5 * Self.ms, present: Self.target + 3 * Self.ms, display: .modeChanged))
        #expect(mode.reason == .modeChange && mode.presentType == .late, "a mode change outranks the app's overrun")
        #expect(FrameJank.classify(Self.facts()).predictionType == .valid)
    }

    @Test func everyReasonMapsToItsPerfettoJankBits() {
        let bits: [FrameJankReason: Int32] = [
            .onTime: 1, .appDeadlineMissed: 64, .daemonLate: 16, .deliveryLate: 2, .presentScheduling: 2,
            .predictionError: 4, .variableRefresh: 8, .displayOff: 8192, .predictedWhileOff: 8192,
            .modeChange: 16384, .unknown: 256,
        ]
        #expect(bits.count == FrameJankReason.allCases.count)
        for reason in FrameJankReason.allCases { #expect(reason.perfettoJankType.rawValue == bits[reason], "\(reason)") }
    }

    @Test func thePresentIsTheFirstVBlankAtOrAfterTheWorksEnd() {
        let p = Self.period
        let ref: UInt64 = 5_000 * Self.ms
        func present(_ end: UInt64) -> (UInt64, UInt64) {
            let v = FrameJank.presentVBlank(workEndedNs: end, referenceSequence: 300, referenceNs: ref, periodNs: p)
            return (v.sequence, v.timestampNs)
        }
        #expect(present(ref) == (300, ref))
        #expect(present(ref - 1) == (300, ref))
        #expect(present(ref - p) == (299, ref - p))
        #expect(present(ref - p - 1) == (299, ref - p))
        #expect(present(ref + 1) == (301, ref + p))
        #expect(present(ref + p) == (301, ref + p))
        #expect(present(ref + p + 1) == (302, ref + 2 * p))
    }

    @Test func aTickIsDueAtItsCommitPointOrWithoutWorkDurationAtItsVBlank() {
        #expect(FrameFacts.dueNs(targetNs: Self.target, workDurationNs: Self.work, vblankNs: 1) == Self.due)
        #expect(
            FrameFacts.dueNs(targetNs: Self.target, workDurationNs: 0, vblankNs: Self.target - Self.period) == Self.target - Self.period)
        #expect(FrameFacts.dueNs(targetNs: 3, workDurationNs: 5, vblankNs: 1) == 0)
    }

    @Test func aClassifiedFrameMakesItsPerfettoSurfaceFrame() {
        let f = Self.facts(ended: Self.target + 5 * Self.ms, present: Self.target + Self.period)
        let jank = FrameJank.classify(f)
        let frame = PerfettoTrace.SurfaceFrame(token: 9, displayFrameToken: 61, pid: 3, layerName: "link", facts: f, jank: jank)
        #expect(frame.expectedStartNs == Self.due && frame.expectedEndNs == Self.target)
        #expect(frame.actualStartNs == f.receivedNs && frame.actualEndNs == f.workEndedNs)
        #expect(frame.jankType == .appDeadlineMissed && frame.presentType == .late && !frame.onTimeFinish)
        #expect(frame.predictionType == .valid)
        #expect(frame.presentDelayMillis == Float(Double(Self.period) / 1e6))
    }
}
