import Testing
@testable import VsyncCore

/// The vblank grid on CLOCK_REALTIME, for displays on machines whose wall clocks agree: `vsync-probe measure`'s `realtime`.
@Suite("Realtime phase")
struct RealtimePhaseTests {
    static let period = 1e9 / 59.94
    static let epochOffset: UInt64 = 1_795_000_000_000_000_000  // a 2026 wall clock, minus uptime

    static func fit(frames: Int, periodNs: Double) -> (LinearFit, UInt64) {
        let samples = (0..<frames).map { i in
            (farSequenceBase + UInt64(i), vblankTime(farSequenceBase + UInt64(i), periodNs: periodNs))
        }
        return (RefreshModel.fit(samples)!, samples.last!.0)
    }

    @Test("a constant offset: the last vblank moves by it exactly, drift is the rate's error")
    func constantOffset() throws {
        let truePeriod = Self.period * (1 - 12e-6)  // 12 ppm fast
        let (fit, last) = Self.fit(frames: 600, periodNs: truePeriod)
        let startMono = farTimestampBase
        let endMono = vblankTime(last, periodNs: truePeriod) + 5_000_000
        let phase = try #require(RealtimePhase(
            fit: fit, lastSequence: last, nominalPeriodNs: Self.period,
            start: ClockPair(monotonicNs: startMono, realtimeNs: startMono + Self.epochOffset),
            end: ClockPair(monotonicNs: endMono, realtimeNs: endMono + Self.epochOffset)))
        let lastMono = fit.predictedTimestamp(forSequence: last)
        #expect(phase.vblankNs == lastMono + Self.epochOffset)
        #expect(phase.offsetNs == Int64(Self.epochOffset))
        #expect(phase.realtimeVsMonotonicPpm == 0)
        #expect(abs(phase.driftPpm - 12) < 0.01, "\(phase.driftPpm)")
        #expect(abs(phase.periodNs - truePeriod) < 1e-3)
    }

    @Test("a wall clock slewed apart from CLOCK_MONOTONIC: the grid's period and drift on it follow")
    func slewedWallClock() throws {
        let (fit, last) = Self.fit(frames: 600, periodNs: Self.period)
        let startMono = farTimestampBase
        let endMono = vblankTime(last, periodNs: Self.period)
        let span = endMono - startMono
        // CLOCK_REALTIME gained 50 ppm on CLOCK_MONOTONIC over the run.
        let gained = UInt64((Double(span) * 50e-6).rounded())
        let phase = try #require(RealtimePhase(
            fit: fit, lastSequence: last, nominalPeriodNs: Self.period,
            start: ClockPair(monotonicNs: startMono, realtimeNs: startMono + Self.epochOffset),
            end: ClockPair(monotonicNs: endMono, realtimeNs: endMono + Self.epochOffset + gained)))
        #expect(abs(phase.realtimeVsMonotonicPpm - 50) < 0.01)
        // Against the faster wall clock the display looks slow: its frames span more wall time.
        #expect(abs(phase.driftPpm + 50) < 0.01, "\(phase.driftPpm)")
        // The last vblank is at the end pair, so it maps with the end's offset.
        #expect(phase.vblankNs == fit.predictedTimestamp(forSequence: last) + Self.epochOffset + gained)
    }

    @Test("pairs that do not span time give nothing")
    func degenerate() {
        let (fit, last) = Self.fit(frames: 60, periodNs: Self.period)
        let pair = ClockPair(monotonicNs: farTimestampBase, realtimeNs: farTimestampBase + Self.epochOffset)
        #expect(RealtimePhase(fit: fit, lastSequence: last, nominalPeriodNs: Self.period, start: pair, end: pair) == nil)
    }
}
