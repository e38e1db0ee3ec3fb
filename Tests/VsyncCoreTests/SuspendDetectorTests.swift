import Testing
@testable import VsyncCore

@Suite("Suspend detection")
struct SuspendDetectorTests {
    /// Scripted readings: both clocks advance together at 60 Hz reads, apart from small
    /// read-to-read skew, then CLOCK_BOOTTIME jumps 30 s ahead once.
    @Test func oneSuspendReportedOnceAndOnlyOnce() {
        var detector = SuspendDetector()
        var mono: UInt64 = 5_000_000_000, boot: UInt64 = 5_000_000_000 + 123_456_789
        var reports: [(index: Int, asleep: UInt64)] = []
        for i in 0..<600 {
            mono += 16_666_667
            boot += 16_666_667 + (i % 3 == 0 ? 7_000 : 0)  // a reader preempted between the two reads
            if i == 300 { boot += 30_000_000_000 }  // asleep for 30 s: MONOTONIC stood still
            if let asleep = detector.check(monotonicNs: mono, boottimeNs: boot) { reports.append((i, asleep)) }
        }
        #expect(reports.count == 1 && reports.first?.index == 300, "\(reports)")
        #expect(reports.first.map { $0.asleep >= 30_000_000_000 && $0.asleep < 30_000_010_000 } == true)
        #expect(detector.suspendCount == 1)
    }

    @Test func firstReadingAndSmallSkewAreNotSuspends() {
        var detector = SuspendDetector()
        #expect(detector.check(monotonicNs: 1_000, boottimeNs: 99_000_000_000) == nil)
        #expect(detector.check(monotonicNs: 2_000, boottimeNs: 99_099_000_000 - 1) == nil)  // 99 ms: under the threshold
        #expect(detector.check(monotonicNs: 3_000, boottimeNs: 99_199_000_999) == 100_000_000)  // exactly the threshold
        #expect(detector.suspendCount == 1)
    }

    /// What the daemon does with it: the model reset once at resume starts from the first
    /// vblank after it, and is exact again six vblanks later, with no restart or outlier.
    @Test func modeResetAtResumeFitsTheNewPhase() {
        var model = RefreshModel(nominalPeriodNs: period60Hz)
        var detector = SuspendDetector()
        var s = farSequenceBase
        for _ in 0..<200 {
            _ = detector.check(monotonicNs: vblankTime(s, periodNs: period60Hz), boottimeNs: vblankTime(s, periodNs: period60Hz) + 1_000)
            model.add(sequence: s, timestampNs: vblankTime(s, periodNs: period60Hz))
            s += 1
        }
        // Resume: MONOTONIC moved on by one frame and a third; BOOTTIME by that plus 40 s.
        let resumeTs = vblankTime(s - 1, periodNs: period60Hz) + UInt64(1.33 * period60Hz)
        let asleep = detector.check(monotonicNs: resumeTs, boottimeNs: resumeTs + 1_000 + 40_000_000_000)
        #expect(asleep != nil)
        if asleep != nil { model.reset(nominalPeriodNs: period60Hz) }
        for k in 0..<10 {
            let t = resumeTs + UInt64((Double(k) * period60Hz).rounded())
            #expect(detector.check(monotonicNs: t, boottimeNs: t + 1_000 + 40_000_000_000) == nil)
            #expect(model.add(sequence: s + UInt64(k), timestampNs: t) == .accepted)
        }
        #expect(model.restartCount == 0 && model.outlierCount == 0)
        let next = model.next!
        let truth = resumeTs + UInt64((10 * period60Hz).rounded())
        #expect(abs(Double(Int64(bitPattern: next.timestampNs &- truth))) <= 2)
    }
}
