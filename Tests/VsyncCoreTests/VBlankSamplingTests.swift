import TestSupport
import Testing
@testable import VsyncCore

/// A fake CRTC for these tests only: scripted vblanks (sequence, scanout stamp) on a grid whose
/// phase and period the test sets, fed through a `RefreshModel` and `VBlankSampling` the way
/// the daemon feeds them (judge, re-anchor, add, fed).
private struct FakeScriptedCRTC {
    var periodNs: Double
    var phaseNs: Double = 0
    var interruptLatencyNs: (UInt64) -> Double = { _ in 0 }
    var model: RefreshModel
    var sampling: VBlankSampling
    var variable = false

    init(periodNs: Double = period60Hz, mode: VBlankSampling.Mode = .sparse) {
        self.periodNs = periodNs
        model = RefreshModel(nominalPeriodNs: periodNs)
        sampling = VBlankSampling(mode: mode)
    }

    func timestamp(_ s: UInt64) -> UInt64 {
        vblankTime(s, periodNs: periodNs, noiseNs: phaseNs + interruptLatencyNs(s))
    }

    var reading: VBlankSampling.ModelReading {
        .init(
            sampleCount: model.sampleCount, jitterNs: model.jitterNs,
            interruptStamped: model.timestampSource == .interrupt, variable: variable)
    }

    /// Delivers vblank `s` as the daemon would; returns whether vblank events should stop.
    @discardableResult
    mutating func vblank(_ s: UInt64) -> Bool {
        let ts = timestamp(s)
        let predicted = model.sampleCount > 0 ? model.predictedTimestamp(forSequence: s) : nil
        switch sampling.judge(timestampNs: ts, predictedNs: predicted) {
        case .drop: return false
        case .reanchor(let delta): model.reanchor(byNs: delta)
        case .feed: break
        }
        model.add(sequence: s, timestampNs: ts)
        return sampling.fed(at: ts, reading: reading)
    }

    /// The requests ran out before the daemon read them and were queued afresh; the driver's
    /// vblank timer restarted `movedNs` off its old grid. Whether the queue must be topped up.
    @discardableResult
    mutating func requeue(phaseMovedByNs movedNs: Double) -> Bool {
        phaseNs += movedNs
        return sampling.requeued()
    }

    /// Feeds these vblanks; whether events should stop after each.
    mutating func feed(_ sequences: [UInt64]) -> [Bool] { sequences.map { vblank($0) } }

    /// Feeds vblanks from `first` until events should stop; returns the sequence after the last.
    mutating func runUntilAsleep(from first: UInt64, limit: Int = 1000) -> UInt64 {
        var s = first
        for _ in 0..<limit {
            let stop = vblank(s)
            s += 1
            if stop { break }
        }
        return s
    }

    /// The model's error against the fake's grid at `s`, ns.
    func predictionError(_ s: UInt64) -> Int64 {
        Int64(bitPattern: model.predictedTimestamp(forSequence: s) &- timestamp(s))
    }
}

@Suite("Vblank sampling policy")
struct VBlankSamplingTests {
    let base = farSequenceBase

    @Test("continuous mode never lets the interrupt sleep")
    func continuousStays() {
        var crtc = FakeScriptedCRTC(mode: .continuous)
        for i in 0..<600 {
            let stop = crtc.vblank(base + UInt64(i))
            #expect(stop == false)
        }
        #expect(crtc.sampling.wantsVBlank && crtc.sampling.state == .continuous)
    }

    @Test("sparse: continuous until confident, then asleep with the next burst one interval on")
    func learnsThenSleeps() {
        var crtc = FakeScriptedCRTC()
        let after = crtc.runUntilAsleep(from: base)
        #expect(Int(after - base) == VBlankSampling.confidentSamples)
        let last = crtc.timestamp(after - 1)
        #expect(crtc.sampling.state == .asleep(nextBurstNs: last + VBlankSampling.burstIntervalNs))
        #expect(crtc.sampling.isModelTimed)
        let started = crtc.sampling.startBurstIfDue(nowNs: last + VBlankSampling.burstIntervalNs - 1)
        #expect(started == false)
    }

    @Test("a burst on a display whose phase holds: three vblanks (the first dropped), no correction, asleep again")
    func quietBurst() {
        var crtc = FakeScriptedCRTC()
        var s = crtc.runUntilAsleep(from: base)
        let due = crtc.sampling.nextBurstNs!
        let started = crtc.sampling.startBurstIfDue(nowNs: due)
        #expect(started)
        // Two seconds of vblanks nobody saw.
        s += 120
        let stops = crtc.feed([s, s + 1, s + 2])
        #expect(stops == [false, false, true])
        #expect(crtc.sampling.correctionCount == 0)
        #expect(crtc.sampling.largestCorrectionNs <= 1)
        #expect(crtc.sampling.nextBurstNs == crtc.timestamp(s + 2) + VBlankSampling.burstIntervalNs)
    }

    @Test("a phase moved on re-enable (a vblank timer restarted): re-anchored at the burst's first vblank, never predicted on the old grid")
    func phaseMove() {
        var crtc = FakeScriptedCRTC()
        var s = crtc.runUntilAsleep(from: base)
        let started = crtc.sampling.startBurstIfDue(nowNs: crtc.sampling.nextBurstNs!)
        #expect(started)
        s += 120
        // The first vblank after the enable, stamped off any grid (as vkms does), is dropped.
        crtc.phaseNs = 9_000_000
        let restartsBefore = crtc.model.restartCount
        let dropped = crtc.feed([s])
        #expect(dropped == [false] && crtc.sampling.isSettling)
        crtc.phaseNs = 5_300_000  // the timer restarted 5.3 ms off the old grid
        let judged = crtc.feed([s + 1])
        #expect(judged == [false] && !crtc.sampling.isSettling)
        // From the judged vblank of the burst on, every prediction is on the new grid.
        for k in 0..<8 { #expect(abs(crtc.predictionError(s + 1 + UInt64(k))) <= 2) }
        let confirmed = crtc.feed([s + 2])
        #expect(confirmed == [true])
        #expect(crtc.sampling.correctionCount == 1)
        #expect(abs(Int64(crtc.sampling.largestCorrectionNs) - 5_300_000) <= 2)
        // Not a restart of the model (no generation bump, no storm of mode changes).
        #expect(crtc.model.restartCount == restartsBefore && crtc.model.outlierCount == 0)
        #expect(crtc.model.sampleCount >= VBlankSampling.confidentSamples)
    }

    @Test("a burst vblank off the re-anchored grid: continuous until confident again")
    func burstDisagrees() {
        var crtc = FakeScriptedCRTC()
        var s = crtc.runUntilAsleep(from: base)
        let started = crtc.sampling.startBurstIfDue(nowNs: crtc.sampling.nextBurstNs!)
        #expect(started)
        s += 120
        let first = crtc.feed([s, s + 1])
        crtc.phaseNs = 40_000  // the next vblank 40 µs off: not the rate the model has
        let second = crtc.feed([s + 2])
        #expect(first == [false, false] && second == [false])
        #expect(crtc.sampling.state == .continuous)
        #expect(crtc.sampling.wantsVBlank)
    }

    @Test("a burst re-anchored on a stray stamp, its next vblank on the real grid: events stay on until the model agrees again")
    func strayReanchorIsNotSleptOn() {
        var crtc = FakeScriptedCRTC()
        var s = crtc.runUntilAsleep(from: base)
        let started = crtc.sampling.startBurstIfDue(nowNs: crtc.sampling.nextBurstNs!)
        #expect(started)
        s += 120
        crtc.phaseNs = 9_000_000
        _ = crtc.feed([s])  // dropped: the first after the enable
        crtc.phaseNs = 7_700_000  // a stray stamp: the grid moves onto it
        _ = crtc.feed([s + 1])
        crtc.phaseNs = 0  // the display's grid never moved
        var k: UInt64 = 2
        while k < 400, !crtc.vblank(s + k) { k += 1 }
        // Before, the model still read as confident and events stopped at once, leaving every
        // predicted tick 7.7 ms off until the next burst.
        #expect(k > 2 && k < 400, "events stopped after vblank \(k) of the burst")
        for j in 1...8 { #expect(abs(crtc.predictionError(s + k + UInt64(j))) <= Int64(VBlankSampling.boundNs)) }
    }

    @Test("the rate wanders 5 ppm after learning: a 2 s interval drifts 10 µs, within the bound")
    func drift() {
        var crtc = FakeScriptedCRTC()
        var s = crtc.runUntilAsleep(from: base)
        let lastSeen = s - 1
        let started = crtc.sampling.startBurstIfDue(nowNs: crtc.sampling.nextBurstNs!)
        #expect(started)
        s += 120
        // From the last vblank seen the grid runs 5 ppm slow; the judged vblank is the second.
        crtc.phaseNs = Double(s + 1 - lastSeen) * crtc.periodNs * 5e-6
        _ = crtc.feed([s, s + 1])
        #expect(crtc.sampling.correctionCount == 0)
        #expect(crtc.sampling.largestCorrectionNs > 9_000 && crtc.sampling.largestCorrectionNs < 11_000)
    }

    @Test("a burst on request (a subscriber, a display event) only while asleep")
    func requestedBurst() {
        var crtc = FakeScriptedCRTC()
        let whileLearning = crtc.sampling.requestBurst()
        #expect(whileLearning == false)  // events are on anyway
        _ = crtc.runUntilAsleep(from: base)
        let asleep = crtc.sampling.requestBurst()
        #expect(asleep)
        #expect(crtc.sampling.state == .burst(remaining: VBlankSampling.burstLength, judged: false, settling: 1))
        #expect(crtc.sampling.wantsVBlank)
    }

    @Test("interrupt-time stamps: the model is not trusted, sampling stays continuous")
    func interruptStamps() {
        var crtc = FakeScriptedCRTC()
        var rng = SplitMix64(seed: 7)
        let latencies = (0..<600).map { _ in 200_000 + 400_000 * rng.unitInterval() * rng.unitInterval() }
        crtc.interruptLatencyNs = { latencies[Int($0 - farSequenceBase)] }
        for i in 0..<600 {
            let stop = crtc.vblank(base + UInt64(i))
            #expect(stop == false)
        }
        #expect(crtc.model.timestampSource == .interrupt)
        #expect(crtc.sampling.state == .continuous)
    }

    @Test("variable refresh on: sampling stays continuous")
    func variableRefresh() {
        var crtc = FakeScriptedCRTC()
        crtc.variable = true
        for i in 0..<200 {
            let stop = crtc.vblank(base + UInt64(i))
            #expect(stop == false)
        }
        #expect(crtc.sampling.state == .continuous)
    }

    @Test("a mode change or resume (relearn): continuous, and confident again only after the full count")
    func relearnAfterChange() {
        var crtc = FakeScriptedCRTC()
        var s = crtc.runUntilAsleep(from: base)
        crtc.sampling.relearn()
        crtc.model.reset(nominalPeriodNs: period144Hz)
        crtc.periodNs = period144Hz
        crtc.phaseNs = 1e9  // a second on, after the old mode's last vblank
        s += 10
        let after = crtc.runUntilAsleep(from: s)
        #expect(Int(after - s) == VBlankSampling.confidentSamples)
    }

    @Test("learning, the requests ran out and the timer restarted 6.3 ms off: re-anchored, confident on schedule")
    func requeuedWhileLearning() {
        var crtc = FakeScriptedCRTC()
        let half = UInt64(VBlankSampling.confidentSamples / 2)
        #expect(crtc.feed(Array(base..<base + half)).allSatisfy { !$0 })
        let topUp = crtc.requeue(phaseMovedByNs: 6_300_000)
        #expect(topUp == false && crtc.sampling.rephasePending)
        // Two vblanks went by unread while the interrupt was off.
        let after = crtc.runUntilAsleep(from: base + half + 2)
        #expect(Int(after - (base + half + 2)) == VBlankSampling.confidentSamples - Int(half))
        #expect(crtc.sampling.correctionCount == 1 && !crtc.sampling.rephasePending)
        #expect(crtc.model.jitterNs < 1 && crtc.model.outlierCount == 0 && crtc.model.restartCount == 0)
        for k in 0..<8 { #expect(abs(crtc.predictionError(after + UInt64(k))) <= 2) }
    }

    @Test("learning, the same phase move unannounced: the model is not confident on schedule (what the re-queue spares)")
    func unannouncedMoveWhileLearning() {
        var crtc = FakeScriptedCRTC()
        let half = UInt64(VBlankSampling.confidentSamples / 2)
        _ = crtc.feed(Array(base..<base + half))
        crtc.phaseNs += 2_300_000  // within the outlier bound: taken into the fit as jitter
        let stops = crtc.feed(Array(base + half + 2..<base + half + 2 + UInt64(VBlankSampling.confidentSamples)))
        #expect(stops.allSatisfy { !$0 })
        #expect(crtc.sampling.state == .continuous && crtc.model.jitterNs > VBlankSampling.confidentJitterNs)
    }

    @Test("learning, a re-queue whose next vblank is on the grid: nothing moves")
    func requeuedOnGrid() {
        var crtc = FakeScriptedCRTC()
        _ = crtc.feed(Array(base..<base + 10))
        crtc.requeue(phaseMovedByNs: 0)
        _ = crtc.feed([base + 11])
        #expect(crtc.sampling.correctionCount == 0 && !crtc.sampling.rephasePending)
    }

    @Test("learning, the next vblank over half a period off after a re-queue: not a phase move, left to the model")
    func requeuedFarOff() {
        var crtc = FakeScriptedCRTC()
        _ = crtc.feed(Array(base..<base + 10))
        crtc.requeue(phaseMovedByNs: 0)
        // The counter jumped (a resume): a second's worth of time on the same sequence.
        crtc.phaseNs = 1e9
        _ = crtc.feed([base + 11])
        #expect(crtc.sampling.correctionCount == 0 && crtc.model.restartCount == 1)
    }

    @Test("in a burst, the requests ran out and were re-queued (the timer restarted again): the burst starts over, no fallback")
    func requeuedInBurst() {
        var crtc = FakeScriptedCRTC()
        var s = crtc.runUntilAsleep(from: base)
        let started = crtc.sampling.startBurstIfDue(nowNs: crtc.sampling.nextBurstNs!)
        #expect(started)
        s += 120
        crtc.phaseNs = 5_300_000
        let first = crtc.feed([s, s + 1])  // dropped, then judged: re-anchored
        #expect(first == [false, false] && crtc.sampling.correctionCount == 1)
        // One late timer fire served the burst's last request with the judged one: the queue ran dry.
        let topUp = crtc.requeue(phaseMovedByNs: -7_100_000)
        #expect(topUp && crtc.sampling.queueDepth == VBlankSampling.burstLength + VBlankSampling.settlingVBlanks)
        #expect(crtc.sampling.isSettling && crtc.sampling.isModelTimed == false)
        s += 4
        let again = crtc.feed([s, s + 1, s + 2])
        #expect(again == [false, false, true])
        #expect(crtc.sampling.correctionCount == 2 && crtc.model.restartCount == 0 && crtc.model.outlierCount == 0)
        for k in 0..<8 { #expect(abs(crtc.predictionError(s + 2 + UInt64(k))) <= 2) }
    }

    @Test("a burst started over after a re-queue still falls back when its last vblank leaves the re-anchored grid")
    func requeuedBurstStillJudged() {
        var crtc = FakeScriptedCRTC()
        var s = crtc.runUntilAsleep(from: base)
        let started = crtc.sampling.startBurstIfDue(nowNs: crtc.sampling.nextBurstNs!)
        #expect(started)
        s += 120
        _ = crtc.feed([s])
        crtc.requeue(phaseMovedByNs: 3_000_000)
        _ = crtc.feed([s + 3, s + 4])
        crtc.phaseNs += 40_000  // the rate is not the model's
        let last = crtc.feed([s + 5])
        #expect(last == [false] && crtc.sampling.state == .continuous)
    }

    @Test("continuous mode, the requests ran out and the timer restarted 2.77 ms off at 75 Hz: re-anchored at once, never asleep")
    func requeuedContinuousMode() {
        var crtc = FakeScriptedCRTC(periodNs: 1e9 / 75, mode: .continuous)
        _ = crtc.feed(Array(base..<base + 200))
        // Over a fifth of the period: without the re-queue, an outlier run the model needs six
        // vblanks to believe, each ticked with a target on the old grid.
        let topUp = crtc.requeue(phaseMovedByNs: 2_770_000)
        #expect(topUp == false && crtc.sampling.rephasePending)
        let stops = crtc.feed(Array(base + 201..<base + 210))
        #expect(stops.allSatisfy { !$0 } && crtc.sampling.wantsVBlank)
        #expect(crtc.sampling.correctionCount == 1 && !crtc.sampling.rephasePending)
        #expect(crtc.model.outlierCount == 0 && crtc.model.restartCount == 0)
        for k in 0..<8 { #expect(abs(crtc.predictionError(base + 210 + UInt64(k))) <= 2) }
    }
}
