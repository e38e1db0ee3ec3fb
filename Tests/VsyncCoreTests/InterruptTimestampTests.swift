import Foundation  // log
import TestSupport
import Testing
@testable import VsyncCore

/// Timestamps taken at interrupt time (no scanout timestamps, or `drm.timestamp_precision_usec=0`): each vblank's stamp is late by the interrupt
/// latency, one-sided. The lower envelope finds the grid through the soonest ones.
@Suite("Refresh model on interrupt-time timestamps")
struct InterruptTimestampTests {
    /// Exponential latency with median 1 ms (mean 1.44 ms), as in the test bed booted with
    /// `drm.timestamp_precision_usec=0` (p50 ~1 ms, p99 ~2 ms above the floor there).
    static let medianLatencyNs = 1_000_000.0

    static func latency(_ rng: inout SplitMix64, floorNs: Double) -> Double {
        floorNs + -log(rng.unitInterval()) * medianLatencyNs / log(2.0)
    }

    /// The test bed's interrupt stamps under TCG (vm-interrupt.trace): the guest's timer
    /// interrupt runs on the host's next 250 Hz tick, so each stamp is the first tick of a
    /// 4.00025 ms grid at or after the vblank, and intervals are 4 or 5 ticks exactly.
    static let hostTickNs = 4_000_250.0

    static func tickStream(frames: Int, periodNs: Double, tickPhaseNs: Double)
        -> [(sequence: UInt64, timestampNs: UInt64)]
    {
        (0..<frames).map { i in
            let s = farSequenceBase + UInt64(i)
            let t = Double(i) * periodNs - tickPhaseNs
            let late = (t / hostTickNs).rounded(.up) * hostTickNs - t
            return (s, vblankTime(s, periodNs: periodNs, noiseNs: late))
        }
    }

    static func stream(frames: Int, periodNs: Double, seed: UInt64, floorNs: Double = 0)
        -> [(sequence: UInt64, timestampNs: UInt64)]
    {
        var rng = SplitMix64(seed: seed)
        return (0..<frames).map { i in
            let s = farSequenceBase + UInt64(i)
            return (s, vblankTime(s, periodNs: periodNs, noiseNs: latency(&rng, floorNs: floorNs)))
        }
    }

    static func ppm(_ periodNs: Double, _ truth: Double) -> Double { abs(periodNs - truth) / truth * 1e6 }

    /// Least squares' slope from the same samples, for comparison.
    static func leastSquaresPpm(_ samples: [(sequence: UInt64, timestampNs: UInt64)], _ period: Double) -> Double {
        var acc = LineAccumulator()
        for s in samples {
            acc.add(x: signedDelta(s.sequence, samples[0].sequence), y: signedDelta(s.timestampNs, samples[0].timestampNs))
        }
        return ppm(acc.line!.slope, period)
    }

    static func rms(_ v: [Double]) -> Double { (v.reduce(0) { $0 + $1 * $1 } / Double(v.count)).squareRoot() }

    /// Exponential latency (median 1 ms): the lower envelope's error falls as 1/N², least
    /// squares' as 1/N^1.5 (its standard error over 240 frames at 60 Hz is ~80 ppm). Over 160
    /// seeded streams at 60 and 72 Hz, with and without a latency floor, the RMS error is held
    /// to the targets set for it (here 14.9 ppm over 240, 1.8 ppm over 600), the worst to
    /// 5 times them (93 and 6.9 ppm here: a stream whose soonest stamps all came late).
    @Test("whole-run fit, exponential latency: RMS within 20 ppm over 240 frames, 5 ppm over 600",
          arguments: [(240, 20.0), (600, 5.0)])
    func wholeRun(frames: Int, boundPpm: Double) {
        var errors: [Double] = [], leastSquares: [Double] = []
        for hz in [60.0, 72.0] {
            let period = 1e9 / hz
            for seed in UInt64(1)...40 {
                for floor in [0.0, 150_000.0] {
                    let samples = Self.stream(frames: frames, periodNs: period, seed: seed &* 7919 &+ UInt64(hz), floorNs: floor)
                    let fit = RefreshModel.fit(samples)!
                    #expect(fit.timestampSource == .interrupt)
                    errors.append(Self.ppm(fit.periodNs, period))
                    leastSquares.append(Self.leastSquaresPpm(samples, period))
                }
            }
        }
        let (e, l) = (Self.rms(errors), Self.rms(leastSquares))
        print("exponential latency, \(frames) frames: envelope RMS \(e) ppm, worst \(errors.max()!); least squares RMS \(l) ppm")
        #expect(e <= boundPpm, "envelope RMS \(e) ppm over \(frames) frames")
        #expect(errors.max()! <= 5 * boundPpm)
        #expect(l >= 3 * e, "least squares \(l) ppm is not far worse than the envelope's \(e)")
    }

    /// The test bed's own pattern. Over 240 frames its stamps cannot tell the rate to 20 ppm
    /// at every phase: on the recorded trace, every slope from about -100 to +126 ppm fits all
    /// 240 stamps within one tick of lateness (a linear program's feasible set), because the
    /// soonest stamps drift by 12.5 µs every 6 frames until the tick pattern rolls over, about
    /// every 320 frames. So the typical error is held to the target, and the worst is reported.
    @Test("whole-run fit, host-tick stamps: median within 5 ppm, worst 15 ppm over 600 frames",
          arguments: [240, 600])
    func wholeRunTicks(frames: Int) {
        var errors: [Double] = [], leastSquares: [Double] = []
        for hz in [60.003840, 72.0, 144.0] {
            let period = 1e9 / hz
            for k in 0..<40 {
                let samples = Self.tickStream(frames: frames, periodNs: period, tickPhaseNs: Double(k) * 100_000 + 12_345)
                let fit = RefreshModel.fit(samples)!
                #expect(fit.timestampSource == .interrupt)
                errors.append(Self.ppm(fit.periodNs, period))
                leastSquares.append(Self.leastSquaresPpm(samples, period))
            }
        }
        let p = Percentiles(errors)!, q = Percentiles(leastSquares)!
        print("host-tick stamps, \(frames) frames: minimax p50 \(p.p50) max \(p.max) ppm; least squares p50 \(q.p50) max \(q.max) ppm")
        #expect(p.p50 <= 5)
        #expect(p.p50 <= q.p50 / 2)
        if frames >= 600 { #expect(p.max <= 15) }
    }

    /// The test bed after a stall of over a frame with interrupt stamps: the kernel counted one
    /// vblank where two went by, so from there on the count is one behind the clock.
    @Test("whole-run fit: a count that slipped by a frame is taken at the timestamps' count")
    func countSlip() {
        for stamps in ["exact", "host-tick"] {
            var samples = stamps == "exact"
                ? (0..<601).map { i -> (sequence: UInt64, timestampNs: UInt64) in
                    let s = farSequenceBase + UInt64(i)
                    return (s, vblankTime(s, periodNs: period60Hz))
                }
                : Self.tickStream(frames: 601, periodNs: period60Hz, tickPhaseNs: 1_234_567)
            // Frame 300 is lost to the count: the later samples carry a sequence one lower.
            samples.remove(at: 300)
            let truth = RefreshModel.fit(samples)!  // the right count, one sample missing
            for i in 300..<samples.count { samples[i].sequence -= 1 }
            let fit = RefreshModel.fit(samples)!
            // The timestamps' count is the right one: the same fit as with the true count.
            #expect(abs(fit.periodNs - truth.periodNs) <= 1e-6, "\(stamps): \(fit.periodNs) vs \(truth.periodNs)")
            #expect(Self.ppm(fit.periodNs, period60Hz) <= (stamps == "exact" ? 0.01 : 20))
            #expect(fit.timestampSource == truth.timestampSource)
            #expect(fit.timestampSource == (stamps == "exact" ? .scanout : .interrupt))
        }
    }

    @Test("whole-run fit: residuals are the latency above the earliest stamp, never below")
    func wholeRunResiduals() {
        let samples = Self.stream(frames: 600, periodNs: period60Hz, seed: 42, floorNs: 150_000)
        let fit = RefreshModel.fit(samples)!
        // The envelope lies under every stamp (a ns of rounding aside) and touches at least two.
        #expect(fit.residualsNs.allSatisfy { $0 >= -1 })
        #expect(fit.residualsNs.filter { $0 < 1 }.count >= 2)
        // Latency minus its minimum: median ≈ 1 ms; p99 of an exponential is 6.64 × its median.
        let p = Percentiles(fit.residualsNs)!
        #expect(abs(p.p50 / Self.medianLatencyNs - 1) <= 0.15, "p50 \(p.p50)")
        #expect(abs(p.p99 / (6.644 * Self.medianLatencyNs) - 1) <= 0.3, "p99 \(p.p99)")
    }

    @Test("streaming model: flags interrupt stamps, and its window fit beats least squares")
    func streaming() {
        let frames = 3000
        let samples = Self.stream(frames: frames, periodNs: period60Hz, seed: 7, floorNs: 100_000)
        var model = RefreshModel(nominalPeriodNs: period60Hz)
        var worst = 0.0, sumSquares = 0.0, judged = 0
        var flaggedAt: Int?
        for (i, s) in samples.enumerated() {
            // The latency's tail (p99 6.6 ms) passes 20 % of a 60 Hz period about the line now
            // and then: those stamps are outliers, never a restart.
            #expect(model.add(sequence: s.sequence, timestampNs: s.timestampNs) != .restarted)
            if flaggedAt == nil, model.timestampSource == .interrupt { flaggedAt = i + 1 }
            guard i >= 239 else { continue }
            #expect(model.timestampSource == .interrupt)
            let e = Self.ppm(model.periodNs, period60Hz)
            worst = max(worst, e)
            sumSquares += e * e
            judged += 1
        }
        let rms = (sumSquares / Double(judged)).squareRoot()
        print("streaming window 120 on interrupt stamps: period error RMS \(rms) ppm, worst \(worst) ppm")
        // Least squares over 120 frames of this latency: standard error 1.44 ms / √143 990 per
        // frame = 229 ppm. The envelope: RMS under a third of that, worst under 2 of them.
        #expect(rms <= 229.0 / 3)
        #expect(worst <= 2 * 229.0)
        #expect(flaggedAt != nil && flaggedAt! <= 40, "flagged after \(flaggedAt ?? -1) samples")
        #expect(model.outlierCount <= UInt64(frames / 20) && model.restartCount == 0)
        // The prediction is the earliest the stamp can come: the grid plus the floor, within
        // the envelope's own error.
        let next = model.next!
        let grid = vblankTime(next.sequence, periodNs: period60Hz)
        let early = Double(Int64(bitPattern: next.timestampNs &- grid))
        #expect(early >= 100_000 - 60_000 && early <= 100_000 + 60_000, "next vblank \(early) ns after the grid")
        let quality = model.quality
        #expect(quality.timestampSource == .interrupt)
        #expect(quality.p99Ns >= 3 * Self.medianLatencyNs && quality.p99Ns <= 10 * Self.medianLatencyNs)
        #expect(quality.rmsNs >= Self.medianLatencyNs && quality.rmsNs <= 3 * Self.medianLatencyNs)
    }

    @Test("exact stamps and scanout-sized Gaussian jitter stay scanout, with the quality they have")
    func scanoutStays() {
        // σ 8 µs: about what a scanout-position query allows (drm.timestamp_precision_usec, 20 µs).
        let sigma = 8_000.0
        var exact = RefreshModel(nominalPeriodNs: period60Hz)
        var gaussian = RefreshModel(nominalPeriodNs: period60Hz)
        var rng = SplitMix64(seed: 0x5EED_0023)
        var gaussianSamples: [(sequence: UInt64, timestampNs: UInt64)] = []
        for i in 0..<3000 {
            let s = farSequenceBase + UInt64(i)
            exact.add(sequence: s, timestampNs: vblankTime(s, periodNs: period60Hz))
            let t = vblankTime(s, periodNs: period60Hz, noiseNs: sigma * rng.gaussian())
            gaussian.add(sequence: s, timestampNs: t)
            gaussianSamples.append((s, t))
            #expect(exact.timestampSource == .scanout && gaussian.timestampSource == .scanout, "sample \(i)")
        }
        #expect(exact.quality.rmsNs <= 0.5 && exact.quality.p99Ns <= 1)
        #expect(RefreshModel.fit(gaussianSamples)!.timestampSource == .scanout)
        // |N(0, σ)| has p99 2.576 σ; 120 samples put the nearest-rank p99 near the top two.
        #expect(gaussian.quality.p99Ns >= 1.5 * sigma && gaussian.quality.p99Ns <= 3.5 * sigma)
    }

    /// Interrupt latency need not have a late tail: in the test bed with high-resolution timers
    /// it spreads 40–60 µs RMS about its mean with little skew, and was called scanout in some
    /// runs. A spread no scanout stamp has says interrupt whatever its shape (the old rule,
    /// skewness ≥ 1 or flat, called every stream here scanout).
    @Test("a spread scanout stamps cannot have says interrupt, whatever its shape",
          arguments: [50_000.0, 200_000.0])
    func symmetricLatencyIsInterrupt(sigmaNs: Double) {
        var rng = SplitMix64(seed: 0x5EED_0025)
        var model = RefreshModel(nominalPeriodNs: period60Hz)
        var samples: [(sequence: UInt64, timestampNs: UInt64)] = []
        var residuals: [Double] = []
        for i in 0..<600 {
            let s = farSequenceBase + UInt64(i)
            // Latency about a floor of 4σ, symmetric: late, never early, and no late tail.
            let late = max(0, 4 * sigmaNs + sigmaNs * rng.gaussian())
            let t = vblankTime(s, periodNs: period60Hz, noiseNs: late)
            model.add(sequence: s, timestampNs: t)
            samples.append((s, t))
            residuals.append(late - 4 * sigmaNs)
        }
        #expect(model.timestampSource == .interrupt)
        #expect(TimestampSource.judge(residualsNs: residuals) == .interrupt)
        let fit = RefreshModel.fit(samples)!
        #expect(fit.timestampSource == .interrupt)
        // The envelope still finds the grid: within a few ppm over 600 frames.
        #expect(Self.ppm(fit.periodNs, period60Hz) < 5, "\(Self.ppm(fit.periodNs, period60Hz)) ppm")
    }

    @Test("the envelope of a convex point set: the hull edge over the mean x")
    func envelopeBasics() {
        var stack = Array(repeating: 0, count: 8)
        // y = 2x + 10 on x = 0...6 with points 2 and 5 raised: the raised ones are ignored.
        let ys: [Double] = [10, 12, 50, 16, 18, 90, 22]
        let line = EnvelopeFit.lower(count: 7, stack: &stack, x: { Double($0) }, y: { ys[$0] })!
        #expect(line.slope == 2 && line.interceptAtZero == 10)
        // A V: the mean x (2) is the vertex; the slope between the edges (-1 and 3) is 1.
        let v: [Double] = [2, 1, 0, 3, 6]
        let vLine = EnvelopeFit.lower(count: 5, stack: &stack, x: { Double($0) }, y: { v[$0] })
        #expect(vLine?.slope == 1 && vLine?.interceptAtZero == -2)
        #expect(EnvelopeFit.lower(count: 1, stack: &stack, x: { Double($0) }, y: { v[$0] }) == nil)
    }
}
