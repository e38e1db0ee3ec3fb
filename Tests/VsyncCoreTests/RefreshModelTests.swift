import TestSupport
import Testing
@testable import VsyncCore

@Suite("Refresh model")
struct RefreshModelTests {
    // Several rates: at 60 Hz the ns rounding repeats every 3 frames and hides errors of
    // coarser rounding (a Double holding raw ns near 1e18 rounds to 128 ns); 59.94 does not.
    @Test("exact stream: period within the ns-rounding bound, next vblank within 2 ns",
          arguments: [60.0, 1e9 / (1e9 * 1001 / 60000), 75.0, 143.979676])
    func exactStream(hz: Double) {
        let period = 1e9 / hz
        var model = RefreshModel(nominalPeriodNs: period)
        for i in 0..<1000 {
            let s = farSequenceBase + UInt64(i)
            #expect(model.add(sequence: s, timestampNs: vblankTime(s, periodNs: period)) == .accepted)
        }
        // Timestamps are rounded to the ns, so residuals are within ±0.5 ns; over 120 samples
        // that bounds the slope error by 0.5 · Σ|x−x̄| / Σ(x−x̄)² ≈ 0.0125 ns (0.75 ppb).
        let bound = worstSlopeError(n: 120, residualBound: 0.5)
        #expect(abs(model.periodNs - period) <= bound, "period error \(model.periodNs - period) ns > \(bound) ns")
        #expect(abs(model.refreshHz - hz) <= hz * bound / period * 1.0001)
        let next = model.next!
        #expect(next.sequence == farSequenceBase + 1000)
        let truth = vblankTime(next.sequence, periodNs: period)
        // Extrapolating one frame: ≤ 0.5 ns phase + 61 · 0.0125 ns slope error, so within 2 ns.
        #expect(abs(Double(Int64(bitPattern: next.timestampNs &- truth))) <= 2)
        // Far prediction (1 h ahead) stays within slope bound × frames ahead + 2 ns.
        let ahead = farSequenceBase + 999 + 216_000
        let farError = abs(Double(Int64(bitPattern: model.predictedTimestamp(forSequence: ahead) &- vblankTime(ahead, periodNs: period))))
        #expect(farError <= bound * 216_060 + 2)
        #expect(model.jitterNs <= 0.5)  // RMS of residuals each within ±0.5 ns
        #expect(model.sampleCount == 120)
        #expect(model.missedVblanks == 0 && model.outlierCount == 0 && model.restartCount == 0)
    }

    @Test("59.94 Hz exact stream against a 60 Hz nominal: fit takes over after 6 samples")
    func fittedAfterSix() {
        let period = 1e9 * 1001 / 60000
        var model = RefreshModel(nominalPeriodNs: period60Hz)
        for i in 0..<6 {
            let s = farSequenceBase + UInt64(i)
            // Before the 6th sample the model runs on the nominal period.
            #expect(model.periodNs == period60Hz)
            #expect(model.isFitted == false)
            #expect(model.add(sequence: s, timestampNs: vblankTime(s, periodNs: period)) == .accepted)
        }
        #expect(model.isFitted)
        // 6 samples with ±0.5 ns rounding: slope error ≤ 0.5 · 9 / 17.5 ≈ 0.26 ns.
        #expect(abs(model.periodNs - period) <= worstSlopeError(n: 6, residualBound: 0.5))
    }

    @Test("first sample: next vblank is one nominal period later")
    func firstSample() {
        var model = RefreshModel(nominalPeriodNs: period60Hz)
        #expect(model.next == nil)
        #expect(model.predictedTimestamp(forSequence: 5) == 0)
        #expect(model.add(sequence: 10, timestampNs: farTimestampBase) == .accepted)
        let next = model.next!
        #expect(next.sequence == 11)
        // The nominal period rounded to the ns: 16 666 667.
        #expect(next.timestampNs == farTimestampBase + 16_666_667)
        #expect(model.sampleCount == 1 && model.jitterNs == 0)
    }

    @Test("Gaussian jitter σ = 200 µs: period within 5 standard errors of the fit")
    func gaussianJitter() {
        let sigma = 200_000.0
        var rng = SplitMix64(seed: 0x5EED_0002)
        var model = RefreshModel(nominalPeriodNs: period60Hz)
        var samples: [(sequence: UInt64, timestampNs: UInt64)] = []
        // Standard error of the slope over a full window of 120 consecutive samples:
        // σ / √(N(N²−1)/12) ≈ 527 ns (32 ppm). The check holds it to 5 of those at every sample.
        let windowBound = 5 * sigma / consecutiveSxx(120).squareRoot()
        // One frame ahead of the window's newest sample, the prediction's standard error is
        // σ · √(1/N + (x̄ − 1)² / Sxx) ≈ 36.7 µs; 5 of those.
        let xbar = -59.5
        let nextBound = 5 * sigma * (1.0 / 120 + (xbar - 1) * (xbar - 1) / consecutiveSxx(120)).squareRoot()
        var worstPeriod = 0.0, worstNext = 0.0
        for i in 0..<3000 {
            let s = farSequenceBase + UInt64(i)
            let t = vblankTime(s, periodNs: period60Hz, noiseNs: sigma * rng.gaussian())
            samples.append((s, t))
            // 20 % of a period is 16.7 σ: no Gaussian sample may be rejected.
            #expect(model.add(sequence: s, timestampNs: t) == .accepted)
            guard i >= 119 else { continue }
            worstPeriod = max(worstPeriod, abs(model.periodNs - period60Hz))
            let next = model.next!
            worstNext = max(worstNext, abs(Double(Int64(bitPattern: next.timestampNs &- vblankTime(next.sequence, periodNs: period60Hz)))))
        }
        #expect(worstPeriod <= windowBound, "worst period error \(worstPeriod) ns > \(windowBound) ns")
        #expect(worstNext <= nextBound, "worst next-vblank error \(worstNext) ns > \(nextBound) ns")
        // RMS residual estimates σ·√((N−2)/N); with 118 degrees of freedom its relative
        // standard error is 1/√236 ≈ 6.5 %, so ±20 % is 3 of those.
        #expect(abs(model.jitterNs / sigma - 1) <= 0.2, "jitter \(model.jitterNs) ns vs σ \(sigma)")
        #expect(model.outlierCount == 0 && model.restartCount == 0)

        // Whole-run fit over 3000 samples: standard error σ / √(N(N²−1)/12) ≈ 4.2 ns; 5 of those.
        let fit = RefreshModel.fit(samples)!
        let runBound = 5 * sigma / consecutiveSxx(3000).squareRoot()
        #expect(abs(fit.periodNs - period60Hz) <= runBound, "run period error \(fit.periodNs - period60Hz) ns > \(runBound)")
        #expect(abs(fit.hz - 60) / 60 * 1e6 <= runBound / period60Hz * 1e6 * 1.0001)
        // |residual| of a Gaussian has median 0.674 σ and RMS σ; 3000 samples put both within
        // a few % of that, checked to ±10 %.
        let p = Percentiles(fit.residualsNs.map(abs))!
        #expect(abs(p.p50 / (0.6745 * sigma) - 1) <= 0.1, "p50 \(p.p50)")
        #expect(abs(fit.rmsResidualNs / sigma - 1) <= 0.1)
        #expect(fit.residualsNs.count == samples.count)
    }

    @Test("2 % outliers are rejected and counted; the fit stays within its jitter bound")
    func outliers() {
        let sigma = 20_000.0
        var rng = SplitMix64(seed: 0x5EED_0003)
        var model = RefreshModel(nominalPeriodNs: period60Hz)
        var injected: UInt64 = 0
        for i in 0..<5000 {
            let s = farSequenceBase + UInt64(i)
            var noise = sigma * rng.gaussian()
            // 2 % of samples (never the first 10: the model needs a phase before it can reject)
            // are off by 30–45 % of a period either way, beyond the 20 % limit.
            let isOutlier = i >= 10 && rng.unitInterval() <= 0.02
            if isOutlier {
                injected += 1
                let size = (0.30 + 0.15 * rng.unitInterval()) * period60Hz
                noise += rng.next() & 1 == 0 ? size : -size
            }
            let verdict = model.add(sequence: s, timestampNs: vblankTime(s, periodNs: period60Hz, noiseNs: noise))
            #expect(verdict == (isOutlier ? .outlier : .accepted), "sample \(i)")
        }
        #expect(injected >= 60 && injected <= 140)  // the seeded stream really has ~2 %
        #expect(model.outlierCount == injected)
        #expect(model.restartCount == 0 && model.missedVblanks == 0)
        // The window holds 120 accepted samples spanning ≥ 120 sequences, so the 5-standard-error
        // bound of consecutive samples (5 · 20 µs / √143 990 ≈ 264 ns) still holds.
        let bound = 5 * sigma / consecutiveSxx(120).squareRoot()
        #expect(abs(model.periodNs - period60Hz) <= bound)
        #expect(abs(model.jitterNs / sigma - 1) <= 0.2)
    }

    @Test("1 % missed vblanks: counted exactly from sequence gaps, fit unaffected")
    func missedVblanks() {
        var rng = SplitMix64(seed: 0x5EED_0004)
        var model = RefreshModel(nominalPeriodNs: period60Hz)
        var dropped: UInt64 = 0
        var s = farSequenceBase
        for _ in 0..<5000 {
            #expect(model.add(sequence: s, timestampNs: vblankTime(s, periodNs: period60Hz)) == .accepted)
            s += 1
            // 1 % of the time, drop a run of 1–3 vblanks.
            if rng.unitInterval() <= 0.01 {
                let run = 1 + rng.next() % 3
                dropped += run
                s += run
            }
        }
        #expect(dropped >= 50)
        #expect(model.missedVblanks == dropped)
        #expect(model.outlierCount == 0)
        // Exact timestamps: the ns-rounding slope bound of 120 consecutive samples holds
        // (gaps only widen the spread of sequences).
        #expect(abs(model.periodNs - period60Hz) <= worstSlopeError(n: 120, residualBound: 0.5))
    }

    @Test("32-bit counter wrapping mid-stream, widened: no gap, no restart, exact fit")
    func wrapThroughWidener() {
        var widener = SequenceWidener()
        var model = RefreshModel(nominalPeriodNs: period60Hz)
        let firstRaw = UInt32.max - 499
        var previous: UInt64?
        for i in 0..<1000 {
            let raw = firstRaw &+ UInt32(i)
            let wide = widener.widen(raw)
            if let previous { #expect(wide == previous + 1) }
            previous = wide
            let t = vblankTime(wide, firstSequence: UInt64(firstRaw), periodNs: period60Hz)
            #expect(model.add(sequence: wide, timestampNs: t) == .accepted)
        }
        #expect(previous == UInt64(firstRaw) + 999)
        #expect(previous! > UInt64(UInt32.max))
        #expect(model.missedVblanks == 0 && model.outlierCount == 0 && model.restartCount == 0)
        #expect(abs(model.periodNs - period60Hz) <= worstSlopeError(n: 120, residualBound: 0.5))
    }

    @Test("refresh changes under the model: restarts within 8 samples, then accurate",
          arguments: [(60.0, 144.0), (144.0, 60.0), (60.0, 120.0), (75.0, 60.0)])
    func unannouncedRefreshChange(from: Double, to: Double) {
        let sigma = 20_000.0
        let (oldPeriod, newPeriod) = (1e9 / from, 1e9 / to)
        var rng = SplitMix64(seed: 0x5EED_0005)
        var model = RefreshModel(nominalPeriodNs: oldPeriod)
        let switchSeq = farSequenceBase + 600
        for i in 0..<600 {
            let s = farSequenceBase + UInt64(i)
            model.add(sequence: s, timestampNs: vblankTime(s, periodNs: oldPeriod, noiseNs: sigma * rng.gaussian()))
        }
        let lastOld = vblankTime(switchSeq - 1, periodNs: oldPeriod)
        func newTime(_ s: UInt64) -> UInt64 {
            vblankTime(s, firstSequence: switchSeq - 1, base: lastOld, periodNs: newPeriod, noiseNs: sigma * rng.gaussian())
        }
        var restartedAfter: Int?
        for k in 0..<8 where restartedAfter == nil {
            let s = switchSeq + UInt64(k)
            if model.add(sequence: s, timestampNs: newTime(s)) == .restarted { restartedAfter = k + 1 }
        }
        #expect(restartedAfter != nil && restartedAfter! <= 8, "no restart within 8 samples")
        #expect(model.restartCount == 1)
        // Right after the restart the fit rests on 6 samples: standard error σ/√17.5 ≈ 4.8 µs; 5 of those.
        #expect(abs(model.periodNs - newPeriod) <= 5 * sigma / consecutiveSxx(6).squareRoot())
        var s = switchSeq + UInt64(restartedAfter ?? 8)
        for _ in 0..<200 {
            #expect(model.add(sequence: s, timestampNs: newTime(s)) == .accepted)
            s += 1
        }
        // After a full window: 5 standard errors of 120 samples (≈ 264 ns).
        #expect(abs(model.periodNs - newPeriod) <= 5 * sigma / consecutiveSxx(120).squareRoot())
        #expect(model.missedVblanks == 0)
    }

    @Test("reset(nominalPeriodNs:) on a mode change: no outliers, nominal until 6 samples, counters kept")
    func resetOnModeChange() {
        var model = RefreshModel(nominalPeriodNs: period60Hz)
        for i in 0..<300 {
            let s = farSequenceBase + UInt64(i)
            model.add(sequence: s, timestampNs: vblankTime(s, periodNs: period60Hz))
        }
        // Drop 2 vblanks before the reset so there is a counter to keep.
        model.add(sequence: farSequenceBase + 302, timestampNs: vblankTime(farSequenceBase + 302, periodNs: period60Hz))
        #expect(model.missedVblanks == 2)
        model.reset(nominalPeriodNs: period144Hz)
        #expect(model.sampleCount == 0 && model.next == nil)
        #expect(model.periodNs == period144Hz && model.nominalPeriodNs == period144Hz)
        let first = farSequenceBase + 310  // a gap across the reset is not counted
        let base = farTimestampBase + 7_000_000_000
        for i in 0..<300 {
            let s = first + UInt64(i)
            #expect(model.add(sequence: s, timestampNs: vblankTime(s, firstSequence: first, base: base, periodNs: period144Hz)) == .accepted)
            if i < 5 { #expect(model.periodNs == period144Hz) }
        }
        #expect(model.missedVblanks == 2 && model.outlierCount == 0 && model.restartCount == 0)
        #expect(abs(model.periodNs - period144Hz) <= worstSlopeError(n: 120, residualBound: 0.5))
    }

    @Test("suspend-like 30 s gap consistent with the period: accepted, gap counted as missed")
    func consistentLongGap() {
        var model = RefreshModel(nominalPeriodNs: period60Hz)
        for i in 0..<200 {
            let s = farSequenceBase + UInt64(i)
            model.add(sequence: s, timestampNs: vblankTime(s, periodNs: period60Hz))
        }
        let after = farSequenceBase + 199 + 1800  // 30 s at 60 Hz
        #expect(model.add(sequence: after, timestampNs: vblankTime(after, periodNs: period60Hz)) == .accepted)
        #expect(model.missedVblanks == 1799 && model.restartCount == 0)
        // The long baseline only sharpens the slope: the 120-sample rounding bound still holds.
        #expect(abs(model.periodNs - period60Hz) <= worstSlopeError(n: 120, residualBound: 0.5))
    }

    @Test("suspend-like 30 s clock jump the counter did not follow: phase restarts at once, period kept",
          arguments: [UInt64(1), UInt64(1800 + 600)])
    func inconsistentLongGap(sequenceStep: UInt64) {
        var model = RefreshModel(nominalPeriodNs: period60Hz)
        var s = farSequenceBase
        for i in 0..<200 {
            s = farSequenceBase + UInt64(i)
            model.add(sequence: s, timestampNs: vblankTime(s, periodNs: period60Hz))
        }
        let fittedPeriod = model.periodNs
        // 30 s plus 0.37 of a frame later: the phase moved, and the sequence step disagrees.
        let resumeSeq = s + sequenceStep
        let resumeTs = vblankTime(s, periodNs: period60Hz) + 30_000_000_000 + UInt64(0.37 * period60Hz)
        #expect(model.add(sequence: resumeSeq, timestampNs: resumeTs) == .restarted)
        #expect(model.sampleCount == 1 && model.restartCount == 1 && model.outlierCount == 0)
        // Period carried over exactly until 6 new samples are in.
        #expect(model.periodNs == fittedPeriod)
        for k in 1..<50 {
            let sk = resumeSeq + UInt64(k)
            let tk = vblankTime(sk, firstSequence: resumeSeq, base: resumeTs, periodNs: period60Hz)
            #expect(model.add(sequence: sk, timestampNs: tk) == .accepted)
        }
        let next = model.next!
        let truth = vblankTime(next.sequence, firstSequence: resumeSeq, base: resumeTs, periodNs: period60Hz)
        // 49 exact samples after the jump: within 2 ns (rounding), as for an exact stream.
        #expect(abs(Double(Int64(bitPattern: next.timestampNs &- truth))) <= 2)
    }

    @Test("duplicate and stale samples are ignored")
    func duplicateAndStale() {
        var model = RefreshModel(nominalPeriodNs: period60Hz)
        for i in 0..<10 {
            let s = farSequenceBase + UInt64(i)
            model.add(sequence: s, timestampNs: vblankTime(s, periodNs: period60Hz))
        }
        let before = (model.sampleCount, model.periodNs, model.next!.timestampNs)
        #expect(model.add(sequence: farSequenceBase + 9, timestampNs: farTimestampBase) == .duplicate)
        #expect(model.add(sequence: farSequenceBase + 3, timestampNs: farTimestampBase) == .stale)
        #expect(model.sampleCount == before.0 && model.periodNs == before.1 && model.next!.timestampNs == before.2)
        #expect(model.missedVblanks == 0 && model.outlierCount == 0)
    }

    /// A compositor's mode set makes the kernel flush the old mode's last event after the
    /// new mode is readable, so the daemon resets the model first and then reads that vblank
    /// again. Its timestamp names it: it must not count twice or seed the new mode's model.
    @Test("a vblank flushed after a reset is a duplicate; a restarted count with newer times is not")
    func flushedEventAfterReset() {
        var model = RefreshModel(nominalPeriodNs: period60Hz)
        let base = farSequenceBase
        for i in 0..<10 { model.add(sequence: base + UInt64(i), timestampNs: vblankTime(base + UInt64(i), periodNs: period60Hz)) }
        let last = (sequence: base + 9, timestampNs: vblankTime(base + 9, periodNs: period60Hz))
        let newPeriod = 1e9 / 144
        model.reset(nominalPeriodNs: newPeriod)
        #expect(model.add(sequence: last.sequence, timestampNs: last.timestampNs) == .duplicate)
        // The same vblank under a count the kernel moved on (its time read again a few µs off).
        #expect(model.add(sequence: last.sequence + 1, timestampNs: last.timestampNs + 3_000) == .duplicate)
        #expect(model.add(sequence: last.sequence + 2, timestampNs: last.timestampNs - 20_000_000) == .stale)
        #expect(model.sampleCount == 0, "an old-mode timestamp seeded the new model")
        // The new mode's vblanks, with a count the driver restarted at 0: accepted, on the new period.
        let t0 = last.timestampNs + 20_000_000
        for s in UInt64(0)..<6 {
            #expect(model.add(sequence: s, timestampNs: t0 + UInt64((Double(s) * newPeriod).rounded())) == .accepted)
        }
        #expect(abs(model.periodNs - newPeriod) < 1)
        #expect(model.predictedTimestamp(forSequence: 6) == t0 + UInt64((6 * newPeriod).rounded()))
    }

    @Test("garbage input never traps and keeps a positive, finite period")
    func garbage() {
        var rng = SplitMix64(seed: 0x5EED_0006)
        var model = RefreshModel(nominalPeriodNs: period60Hz, window: 8)
        for _ in 0..<20_000 {
            let s = rng.next() % 64 == 0 ? rng.next() : (model.next.map { $0.sequence &- 1 } ?? 0) &+ rng.next() % 4
            model.add(sequence: s, timestampNs: rng.next())
            #expect(model.periodNs > 0 && model.periodNs.isFinite)
            #expect(model.jitterNs.isFinite)
        }
        #expect(model.window == 8)
    }

    @Test("whole-run fit: nil for too few samples, exact on an exact stream")
    func staticFit() {
        #expect(RefreshModel.fit([]) == nil)
        #expect(RefreshModel.fit([(1, 100)]) == nil)
        #expect(RefreshModel.fit([(1, 100), (1, 200)]) == nil)
        let period = 1e9 * 1001 / 60000
        let samples = (0..<500).map { i -> (sequence: UInt64, timestampNs: UInt64) in
            let s = farSequenceBase + UInt64(i) * 2  // every other vblank: gaps are fine
            return (s, vblankTime(s, periodNs: period))
        }
        let fit = RefreshModel.fit(samples)!
        // ±0.5 ns rounding over 500 samples spanning 999 sequences: well under the 500-consecutive bound.
        #expect(abs(fit.periodNs - period) <= worstSlopeError(n: 500, residualBound: 0.5))
        #expect(fit.residualsNs.allSatisfy { abs($0) <= 1 })
        #expect(fit.predictedTimestamp(forSequence: samples[0].sequence) == samples[0].timestampNs)
    }
}
