import Testing
@testable import VsyncCore

/// A display and one paced subscription in simulated time, driven the way the daemon drives
/// them: vblanks feed the model and re-aim the pacer; the pacer's wake fires it. A fake vblank
/// source for testing the pure scheduling logic.
struct PacingSimulation {
    var periodNs: Double
    /// Each mode's vblank progression: where it starts (sequence, ns) and its period.
    var modes: [(sequence: UInt64, timestampNs: UInt64, periodNs: Double)]
    var model: RefreshModel
    var pacer = FramePacer()
    var divisor: UInt32
    var workDurationNs: UInt64
    var paused = false
    /// How late each wake-up runs (the daemon's latency).
    var wakeLatencyNs: UInt64 = 0
    var latest: UInt64
    var nowNs: UInt64
    var wakes: [(nowNs: UInt64, frame: FramePacing.Target, skipped: UInt64)] = []

    init(periodNs: Double, divisor: UInt32, workDurationNs: UInt64) {
        self.periodNs = periodNs
        self.divisor = divisor
        self.workDurationNs = workDurationNs
        modes = [(farSequenceBase, farTimestampBase, periodNs)]
        model = RefreshModel(nominalPeriodNs: periodNs)
        latest = farSequenceBase
        nowNs = farTimestampBase
        _ = model.add(sequence: latest, timestampNs: nowNs)
    }

    func vblankNs(_ s: UInt64) -> UInt64 {
        let mode = modes.last { $0.sequence <= s } ?? modes[0]
        return vblankTime(s, firstSequence: mode.sequence, base: mode.timestampNs, periodNs: mode.periodNs)
    }

    mutating func predict(_ s: UInt64) -> UInt64 { model.predictedTimestamp(forSequence: s) }

    /// Runs until `endNs`, in event order.
    mutating func run(until endNs: UInt64) {
        while true {
            let nextVBlank = vblankNs(latest + 1)
            let wake = paused ? nil : pacer.target.map { $0.wakeNs + wakeLatencyNs }
            let next = min(nextVBlank, wake ?? .max)
            guard next <= endNs else { nowNs = endNs; return }
            nowNs = max(nowNs, next)
            let m = model
            if let wake, wake <= nextVBlank {
                if let fired = pacer.fire(nowNs: nowNs, newestSequence: latest, periodNs: m.periodNs) {
                    wakes.append((nowNs, fired.frame, fired.skipped))
                }
                aim()  // the daemon aims at the next frame once the ticks are out
            } else {
                latest += 1
                _ = model.add(sequence: latest, timestampNs: nextVBlank)
                aim()
            }
        }
    }

    /// What the daemon does after a vblank or a change: re-aim (unless paused).
    mutating func aim() {
        guard !paused else { pacer.reschedule(); return }
        let m = model
        _ = pacer.update(
            divisor: divisor, workDurationNs: workDurationNs, latestSequence: latest, nowNs: nowNs,
            periodNs: m.periodNs) { m.predictedTimestamp(forSequence: $0) }
    }

    /// Re-aims at `nowNs`, as the daemon does once a wake-up's ticks are out.
    mutating func aim(at nowNs: UInt64) {
        self.nowNs = nowNs
        aim()
    }

    mutating func changeMode(periodNs: Double) {
        // The kernel keeps counting across a mode change; the new progression starts at the next vblank.
        modes.append((latest + 1, nowNs + UInt64(periodNs), periodNs))
        self.periodNs = periodNs
        model.reset(nominalPeriodNs: periodNs)
        pacer.reschedule()
    }

    /// Every wake: on a multiple of the divisor, strictly after the previous target, woken at
    /// the true vblank time − W (timer-exact stream: the model's prediction is exact).
    func checkWakes(_ slice: ArraySlice<(nowNs: UInt64, frame: FramePacing.Target, skipped: UInt64)>, divisor: UInt64, workDurationNs: UInt64) {
        var previous: UInt64?
        for w in slice {
            #expect(w.frame.sequence % divisor == 0, "target \(w.frame.sequence) not a multiple of \(divisor)")
            if let previous { #expect(w.frame.sequence > previous, "target \(w.frame.sequence) after \(previous)") }
            previous = w.frame.sequence
            // The model's double arithmetic rounds to within 1 ns of the kernel-style integer times.
            let truth = vblankNs(w.frame.sequence)
            #expect(w.frame.presentationNs >= truth - 1 && w.frame.presentationNs <= truth + 1, "predicted \(w.frame.presentationNs), vblank at \(truth)")
            #expect(w.frame.wakeNs == w.frame.presentationNs - workDurationNs)
            #expect(w.nowNs >= w.frame.wakeNs && w.nowNs - w.frame.wakeNs <= wakeLatencyNs)
        }
    }
}

@Suite("Frame pacing")
struct FramePacingTests {
    @Test(arguments: [(UInt32(1), UInt64(4_000_000)), (2, 4_000_000), (3, 10_000_000)])
    func wakesAtTheTargetMinusTheWorkDuration(divisor: UInt32, work: UInt64) {
        var sim = PacingSimulation(periodNs: period60Hz, divisor: divisor, workDurationNs: work)
        sim.run(until: farTimestampBase + 2_000_000_000)
        #expect(sim.wakes.count >= 118 / Int(divisor), "\(sim.wakes.count) wakes in 2 s")
        sim.checkWakes(sim.wakes[...], divisor: UInt64(divisor), workDurationNs: work)
        // Consecutive targets one client frame apart, and nothing skipped.
        for (a, b) in zip(sim.wakes, sim.wakes.dropFirst()) { #expect(b.frame.sequence - a.frame.sequence == UInt64(divisor)) }
        #expect(sim.wakes.allSatisfy { $0.skipped == 0 })
    }

    @Test func aWorkDurationLongerThanAFrameOverlapsFrames() {
        let work: UInt64 = 40_000_000  // 2.4 frames at 60 Hz
        var sim = PacingSimulation(periodNs: period60Hz, divisor: 1, workDurationNs: work)
        sim.wakeLatencyNs = 50_000
        sim.run(until: farTimestampBase + 1_000_000_000)
        sim.checkWakes(sim.wakes[...], divisor: 1, workDurationNs: work)
        // Woken for s while vblank s − 2 has not happened yet: three frames in flight.
        let ahead = sim.wakes.filter { sim.vblankNs($0.frame.sequence - 2) > $0.nowNs }
        #expect(ahead.count >= sim.wakes.count - 3)
        #expect(sim.wakes.allSatisfy { $0.skipped == 0 })
    }

    @Test func theFirstTargetIsTheFirstWhoseWakeIsAhead() {
        let model = { () -> RefreshModel in
            var m = RefreshModel(nominalPeriodNs: period60Hz)
            for s in 0..<UInt64(10) { _ = m.add(sequence: farSequenceBase + s, timestampNs: vblankTime(farSequenceBase + s, periodNs: period60Hz)) }
            return m
        }()
        let latest = farSequenceBase + 9
        let now = vblankTime(latest, periodNs: period60Hz) + 5_000_000  // 5 ms after the newest vblank
        for (work, divisor, expected) in [(UInt64(4_000_000), UInt32(1), latest + 1), (12_000_000, 1, latest + 2), (4_000_000, 4, farSequenceBase + 12), (30_000_000, 1, latest + 3)] {
            let next = FramePacing.nextTarget(after: latest, divisor: divisor, workDurationNs: work, nowNs: now, periodNs: model.periodNs) { model.predictedTimestamp(forSequence: $0) }
            #expect(next.target.sequence == expected, "W \(work) d \(divisor): target \(next.target.sequence - farSequenceBase), expected \(expected - farSequenceBase)")
            #expect(next.target.wakeNs >= now)
            let earlier = next.target.sequence - UInt64(divisor)
            #expect(model.predictedTimestamp(forSequence: earlier) - work < now || earlier <= latest, "an earlier multiple would have fit")
        }
    }

    @Test func aWorkDurationChangedMidStreamNeverRepeatsAFrame() {
        var sim = PacingSimulation(periodNs: period60Hz, divisor: 1, workDurationNs: 4_000_000)
        sim.run(until: farTimestampBase + 500_000_000)
        let first = sim.wakes.count
        sim.workDurationNs = 12_000_000
        sim.aim()
        sim.run(until: farTimestampBase + 1_000_000_000)
        let second = sim.wakes.count
        sim.workDurationNs = 2_000_000
        sim.aim()
        sim.run(until: farTimestampBase + 1_500_000_000)
        sim.checkWakes(sim.wakes[..<first], divisor: 1, workDurationNs: 4_000_000)
        sim.checkWakes(sim.wakes[first..<second], divisor: 1, workDurationNs: 12_000_000)
        sim.checkWakes(sim.wakes[second...], divisor: 1, workDurationNs: 2_000_000)
        let targets = sim.wakes.map(\.frame.sequence)
        #expect(zip(targets, targets.dropFirst()).allSatisfy { $0 < $1 }, "a frame handed out twice or out of order")
        // Raising W mid-frame aims at the first frame whose wake is still ahead: at most one passed over.
        #expect(sim.wakes[first].frame.sequence - targets[first - 1] <= 2)
        #expect(second - first >= 28 && sim.wakes.count - second >= 28)
    }

    /// A frame handed out twice, as a client found: a tick on a vblank (no work duration) hands out the frame it targets;
    /// a work duration set just after aims past it, and the vblank path skips a frame a wake-up
    /// with a long work duration already handed out.
    @Test func framesHandedOutOnVBlanksAreNotHandedOutAgainByWakeUps() {
        var sim = PacingSimulation(periodNs: period60Hz, divisor: 2, workDurationNs: 0)
        // Vblank `latest` (even) ticked at once, target latest + 2, as the daemon does without W.
        sim.latest += sim.latest % 2
        sim.nowNs = sim.vblankNs(sim.latest) + 100_000
        let handedOut = sim.latest + 2
        #expect(sim.pacer.isNew(handedOut))
        sim.pacer.handedOut(handedOut)
        #expect(!sim.pacer.isNew(handedOut) && sim.pacer.isNew(handedOut + 2))
        // A work duration of 4 ms arrives 0.1 ms after that vblank: the wake for latest + 2 is
        // still 29 ms ahead, but that frame is the client's already.
        sim.workDurationNs = 4_000_000
        sim.aim()
        #expect(sim.pacer.target?.sequence == handedOut + 2)
        sim.run(until: sim.nowNs + 200_000_000)
        #expect(sim.wakes.first?.frame.sequence == handedOut + 2 && sim.wakes.first?.skipped == 0)
        // The other way: a wake-up with W = 40 ms hands out frames ahead of the vblank they
        // follow; once W is 0 again, the vblank path must not hand them out a second time.
        sim.workDurationNs = 40_000_000
        sim.aim()
        sim.run(until: sim.nowNs + 200_000_000)
        // Stop just after a wake-up: it handed out frame s while vblank s − 2 is still ahead.
        let aimed = sim.pacer.target!
        sim.run(until: aimed.wakeNs + 1)
        #expect(sim.wakes.last?.frame.sequence == aimed.sequence)
        let nextEven = sim.latest + 1 + (sim.latest + 1) % 2
        #expect(nextEven + 2 == aimed.sequence, "vblank \(nextEven) would target the frame just handed out")
        #expect(!sim.pacer.isNew(aimed.sequence) && sim.pacer.isNew(aimed.sequence + 2))
    }

    @Test func aRateChangeMovesTargetsToTheNewMultiples() {
        var sim = PacingSimulation(periodNs: period144Hz, divisor: 1, workDurationNs: 5_000_000)
        sim.run(until: farTimestampBase + 300_000_000)
        let before = sim.wakes.count
        sim.divisor = 3
        sim.aim()
        sim.run(until: farTimestampBase + 800_000_000)
        sim.checkWakes(sim.wakes[..<before], divisor: 1, workDurationNs: 5_000_000)
        sim.checkWakes(sim.wakes[before...], divisor: 3, workDurationNs: 5_000_000)
        #expect(sim.wakes[before].frame.sequence > sim.wakes[before - 1].frame.sequence)
        #expect(sim.wakes.count - before >= 23, "\(sim.wakes.count - before) wakes in 0.5 s at 48 Hz")
    }

    @Test func aModeChangeReaimsOnTheNewPeriod() {
        var sim = PacingSimulation(periodNs: period60Hz, divisor: 1, workDurationNs: 5_000_000)
        sim.run(until: farTimestampBase + 500_000_000)
        let before = sim.wakes.count
        sim.changeMode(periodNs: period144Hz)
        sim.run(until: farTimestampBase + 1_000_000_000)
        sim.checkWakes(sim.wakes[..<before], divisor: 1, workDurationNs: 5_000_000)
        // After the model's restart its first predictions extrapolate from few samples: the
        // nominal period makes them exact here, as on vkms.
        sim.checkWakes(sim.wakes[before...], divisor: 1, workDurationNs: 5_000_000)
        let targets = sim.wakes.map(\.frame.sequence)
        #expect(zip(targets, targets.dropFirst()).allSatisfy { $0 < $1 })
        #expect(sim.wakes.count - before >= 68, "\(sim.wakes.count - before) wakes in 0.5 s at 144 Hz")
    }

    @Test func pauseStopsWakesAndResumeAimsAhead() {
        var sim = PacingSimulation(periodNs: period60Hz, divisor: 2, workDurationNs: 6_000_000)
        sim.run(until: farTimestampBase + 300_000_000)
        let before = sim.wakes.count
        sim.paused = true
        sim.aim()
        sim.run(until: farTimestampBase + 800_000_000)
        #expect(sim.wakes.count == before, "woken while paused")
        #expect(sim.pacer.target == nil)
        sim.paused = false
        sim.aim()
        let resumedAt = sim.nowNs
        sim.run(until: farTimestampBase + 1_200_000_000)
        let first = sim.wakes[before]
        #expect(first.frame.wakeNs >= resumedAt)
        #expect(first.frame.wakeNs - resumedAt < UInt64(2 * period60Hz), "first wake after resume \(first.frame.wakeNs - resumedAt) ns later")
        sim.checkWakes(sim.wakes[before...], divisor: 2, workDurationNs: 6_000_000)
    }

    @Test func aLateWakeSkipsFramesWhoseWakeHasGoneAndCountsThem() throws {
        var sim = PacingSimulation(periodNs: period60Hz, divisor: 1, workDurationNs: 4_000_000)
        sim.run(until: farTimestampBase + 200_000_000)
        let m = sim.model
        let target = try #require(sim.pacer.target)
        // Late by 3 ms of the 4: the target is still ahead, so it is handed out.
        let onTime = sim.pacer.fire(nowNs: target.wakeNs + 3_000_000, newestSequence: sim.latest, periodNs: m.periodNs)
        #expect(onTime?.frame == target && onTime?.skipped == 0)
        // Fired: nothing is aimed at until the daemon re-aims, after the ticks are out.
        #expect(sim.pacer.target == nil)
        sim.aim(at: target.wakeNs + 3_000_000)

        // Late by 40 ms: that target has already been shown. Nothing is handed out for it; the
        // next frame whose wake is still ahead is aimed at, and all passed over are counted with it.
        let second = try #require(sim.pacer.target)
        let late = second.wakeNs + 40_000_000
        let missed = sim.pacer.fire(nowNs: late, newestSequence: sim.latest, periodNs: m.periodNs)
        #expect(missed == nil)
        sim.aim(at: late)
        let next = try #require(sim.pacer.target)
        #expect(next.wakeNs >= late)
        let fired = sim.pacer.fire(nowNs: next.wakeNs, newestSequence: sim.latest, periodNs: m.periodNs)
        let delivered = try #require(fired)
        #expect(delivered.frame == next)
        #expect(delivered.skipped == next.sequence - second.sequence)
        #expect(delivered.skipped >= 3)
    }

    /// A late wake whose frame is still ahead hands it out; frames whose wakes went by meanwhile
    /// are counted with the next frame handed out (what the client missed since its last
    /// tick), and a pause in between skips nothing.
    @Test func framesPassedAfterALateWakeAreCountedWithTheNextOne() throws {
        // W = 40 ms at 60 Hz: each frame's wake comes 2.4 frames before its vblank.
        var sim = PacingSimulation(periodNs: period60Hz, divisor: 1, workDurationNs: 40_000_000)
        sim.run(until: farTimestampBase + 300_000_000)
        var paused = sim  // the same state, for the pause below
        let m = sim.model
        let target = try #require(sim.pacer.target)
        // 30 ms late: its vblank is 10 ms ahead, but the next frame's wake went by 13.3 ms ago.
        let late = target.wakeNs + 30_000_000
        let lateFire = sim.pacer.fire(nowNs: late, newestSequence: sim.latest, periodNs: m.periodNs)
        let fired = try #require(lateFire)
        #expect(fired.frame == target && fired.skipped == 0)
        sim.aim(at: late)
        let next = try #require(sim.pacer.target)
        #expect(next.sequence == target.sequence + 2)
        let nextFire = sim.pacer.fire(nowNs: next.wakeNs, newestSequence: sim.latest, periodNs: m.periodNs)
        let second = try #require(nextFire)
        #expect(second.frame == next && second.skipped == 1)

        // The same late wake, then a pause: resumed, the next frame carries no skipped count.
        let beforePause = paused.pacer.fire(nowNs: late, newestSequence: paused.latest, periodNs: m.periodNs)
        #expect(beforePause?.frame == target)
        paused.pacer.reschedule()
        paused.aim(at: late)
        let resumed = try #require(paused.pacer.target)
        let resumedFire = paused.pacer.fire(nowNs: resumed.wakeNs, newestSequence: paused.latest, periodNs: m.periodNs)
        let afterPause = try #require(resumedFire)
        #expect(afterPause.frame.sequence > target.sequence && afterPause.skipped == 0)
    }

    /// A wake-up later than several frames (a predicted tick while the display is off, W = 0:
    /// the tick is the vblank itself) counts every frame since the last one handed out, also
    /// those the newest vblank has already passed.
    @Test func aWakeSeveralFramesLateCountsEveryFramePassed() throws {
        var sim = PacingSimulation(periodNs: period60Hz, divisor: 1, workDurationNs: 0)
        sim.run(until: farTimestampBase + 200_000_000)
        let m = sim.model
        let target = try #require(sim.pacer.target)
        // 3.5 frames late: the newest vblank is 3 past the target, whose tick is stale.
        let late = target.wakeNs + UInt64(3.5 * period60Hz)
        let missed = sim.pacer.fire(nowNs: late, newestSequence: target.sequence + 3, periodNs: m.periodNs)
        #expect(missed == nil)
        sim.latest = target.sequence + 3
        sim.aim(at: late)
        let next = try #require(sim.pacer.target)
        #expect(next.sequence == target.sequence + 4)
        let fired = sim.pacer.fire(nowNs: next.wakeNs, newestSequence: sim.latest, periodNs: m.periodNs)
        let delivered = try #require(fired)
        #expect(delivered.skipped == 4, "frames \(target.sequence)…\(target.sequence + 3) were never handed out")
    }

    /// A model that has not caught up with a mode change may still think a target is ahead
    /// when a real vblank at or past it has come: that frame is passed over, never handed out
    /// with a target behind its newest vblank.
    @Test func aTargetAlreadyPassedByARealVBlankIsNotHandedOut() throws {
        var sim = PacingSimulation(periodNs: period60Hz, divisor: 1, workDurationNs: 5_000_000)
        sim.run(until: farTimestampBase + 200_000_000)
        let m = sim.model
        let target = try #require(sim.pacer.target)
        let fired = sim.pacer.fire(nowNs: target.wakeNs, newestSequence: target.sequence, periodNs: m.periodNs)
        #expect(fired == nil)
        sim.aim(at: target.wakeNs)
        let next = try #require(sim.pacer.target)
        #expect(next.sequence > target.sequence)
    }

    /// A prediction that never moves (a model with no samples says 0) must not hang the
    /// daemon's loop: the search is bounded.
    @Test func aDegeneratePredictionEndsTheSearch() {
        let next = FramePacing.nextTarget(after: 10, divisor: 2, workDurationNs: 4_000_000, nowNs: 5_000_000_000, periodNs: 0) { _ in 0 }
        #expect(next.target.sequence > 10 && next.target.sequence % 2 == 0)
        let latest = FramePacing.latestVBlank(atOrBefore: 5_000_000_000, atLeast: 10, periodNs: 0) { _ in 0 }
        #expect(latest >= 10)
    }

    @Test func timelinesFollowTheTargetAtTheRate() {
        var m = RefreshModel(nominalPeriodNs: period144Hz)
        for s in 0..<UInt64(20) { _ = m.add(sequence: farSequenceBase + s, timestampNs: vblankTime(farSequenceBase + s, periodNs: period144Hz)) }
        let target = farSequenceBase + 22
        let t = FramePacing.timelines(from: target, divisor: 2) { m.predictedTimestamp(forSequence: $0) }
        #expect(t.count == 4)
        for (k, timeline) in t.enumerated() {
            #expect(timeline.sequence == target + 2 * UInt64(k))
            #expect(timeline.presentationNs == vblankTime(timeline.sequence, periodNs: period144Hz))
        }
    }

    @Test func theLatestPredictedVBlankIsAtOrBeforeNow() {
        var m = RefreshModel(nominalPeriodNs: period60Hz)
        for s in 0..<UInt64(10) { _ = m.add(sequence: farSequenceBase + s, timestampNs: vblankTime(farSequenceBase + s, periodNs: period60Hz)) }
        for gapNs in [UInt64(0), 1, 16_666_666, 16_666_667, 3_000_000_000] {
            let now = vblankTime(farSequenceBase + 9, periodNs: period60Hz) + gapNs
            let s = FramePacing.latestVBlank(atOrBefore: now, atLeast: farSequenceBase + 9, periodNs: m.periodNs) { m.predictedTimestamp(forSequence: $0) }
            #expect(m.predictedTimestamp(forSequence: s) <= now && m.predictedTimestamp(forSequence: s + 1) > now, "gap \(gapNs)")
        }
    }
}
