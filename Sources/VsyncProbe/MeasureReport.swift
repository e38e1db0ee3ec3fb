import VsyncCore
import VsyncDRM

/// What `vsync-probe measure` found. Encoded as the `--json` object.
struct MeasureReport: Encodable {
    struct Spread: Encodable {
        var p50: Double
        var p99: Double
        var max: Double
    }

    var device: String
    var driver: String
    var crtcId: UInt32
    var connector: String?
    var mode: String?
    /// The mode's timings, so a reader can redo the exact-rate math.
    var timings: ModeTimings?
    /// "crtc-sequence" or "wait-vblank".
    var source: String
    var monotonic: Bool
    var frames: Int
    var missed: UInt64
    var nominalHz: Double
    var measuredHz: Double
    var ppm: Double
    var jitterUs: Spread
    var wakeLatencyUs: Spread
    /// "scanout", or "interrupt" when the residuals' spread says the kernel stamped the
    /// interrupt's time (large, and skewed late or flat): then the fit is the envelope.
    var timestampSource: TimestampSource
    /// The timestamps against the fitted line: RMS and p99 of |residual|, µs.
    var residualUs: Residual
    /// The grid on CLOCK_REALTIME (nil for a card whose stamps are CLOCK_REALTIME already).
    var realtime: RealtimePhase?

    struct Residual: Encodable {
        var rms: Double
        var p99: Double
    }

    /// Fits the kernel timestamps over the whole run. Nil with fewer than two samples.
    init?(target: Target, samples: [VBlankSample], method: VBlankMethod, clocks: (start: ClockPair, end: ClockPair)) {
        guard let rate = target.crtc.mode?.refreshRate,
            let fit = RefreshModel.fit(samples.map { ($0.sequence, $0.timestampNs) }),
            let jitter = Percentiles(fit.residualsNs.map { abs($0) / 1000 }),
            let wake = Percentiles(samples.map { Double(Int64(bitPattern: $0.receivedNs &- $0.timestampNs)) / 1000 })
        else { return nil }
        device = target.card.path
        driver = target.card.driverName
        crtcId = target.crtc.id
        connector = target.connector?.name
        mode = target.crtc.mode?.name
        timings = target.crtc.mode?.timings
        source = method.rawValue
        monotonic = target.card.hasMonotonicTimestamps
        frames = samples.count
        missed = zip(samples, samples.dropFirst()).reduce(0) { total, pair in
            total + (pair.1.sequence > pair.0.sequence ? pair.1.sequence - pair.0.sequence - 1 : 0)
        }
        nominalHz = rate.hertz
        measuredHz = fit.hz
        ppm = (fit.hz - rate.hertz) / rate.hertz * 1e6
        jitterUs = Spread(p50: jitter.p50, p99: jitter.p99, max: jitter.max)
        wakeLatencyUs = Spread(p50: wake.p50, p99: wake.p99, max: wake.max)
        let quality = TimingQuality(residualsNs: fit.residualsNs, timestampSource: fit.timestampSource)
        timestampSource = quality.timestampSource
        residualUs = Residual(rms: quality.rmsNs / 1000, p99: quality.p99Ns / 1000)
        realtime =
            monotonic
            ? RealtimePhase(
                fit: fit, lastSequence: samples[samples.count - 1].sequence, nominalPeriodNs: rate.periodNanoseconds,
                start: clocks.start, end: clocks.end)
            : nil
    }

    var text: [String] {
        func us(_ s: Spread) -> String {
            "p50 \(fixed(s.p50, 1)) µs, p99 \(fixed(s.p99, 1)) µs, max \(fixed(s.max, 1)) µs"
        }
        return [
            "device    \(device) (\(driver)), CRTC \(crtcId)\(connector.map { ", connector \($0)" } ?? "")\(mode.map { ", mode \($0)" } ?? "")",
            "source    \(source), \(monotonic ? "CLOCK_MONOTONIC" : "CLOCK_REALTIME (not comparable with clients)") timestamps",
            "frames    \(frames), missed \(missed)",
            "nominal   \(Mode.hertzText(nominalHz)) Hz",
            "measured  \(Mode.hertzText(measuredHz)) Hz (\(ppm >= 0 ? "+" : "")\(fixed(ppm, 3)) ppm)",
            "jitter    \(us(jitterUs))",
            "wake-up   \(us(wakeLatencyUs))",
            "timestamps \(timestampSource.rawValue), residual RMS \(fixed(residualUs.rms, 1)) µs, p99 \(fixed(residualUs.p99, 1)) µs",
        ]
            + (realtime.map { r in
                [
                    "realtime  a vblank at \(r.vblankNs / 1_000_000_000).\(String(repeating: "0", count: 9 - String(r.vblankNs % 1_000_000_000).count))\(r.vblankNs % 1_000_000_000) (CLOCK_REALTIME), drift \(r.driftPpm >= 0 ? "+" : "")\(fixed(r.driftPpm, 3)) ppm"
                ]
            } ?? [])
    }
}

/// `value` with `digits` decimals, without Foundation's String(format:).
func fixed(_ value: Double, _ digits: Int) -> String {
    guard value.isFinite else { return "\(value)" }
    var scale = 1.0
    for _ in 0..<digits { scale *= 10 }
    let scaled = (abs(value) * scale).rounded()
    guard scaled < 9e15 else { return "\(value)" }
    let n = UInt64(scaled)
    let whole = n / UInt64(scale)
    let frac = String(n % UInt64(scale))
    let sign = value < 0 && n != 0 ? "-" : ""
    return digits == 0 ? "\(sign)\(whole)" : "\(sign)\(whole).\(String(repeating: "0", count: digits - frac.count))\(frac)"
}
