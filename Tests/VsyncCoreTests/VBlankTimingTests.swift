import Testing
import VsyncCore

/// The timing page's record as clients use it: where the next vblank is (protocol 5, § 10).
@Suite("VBlankTiming: the next vblank from the page's line") struct VBlankTimingTests {
    /// 59.94 Hz: a period with a fraction the ns field alone would lose.
    static func ntsc(anchorSequence: UInt64 = 1_000, anchorNs: UInt64 = 10_000_000_000) -> VBlankTiming {
        let split = VBlankTiming.split(periodNs: 1e9 * 1001 / 60_000)
        return VBlankTiming(displayID: 1, generation: 0, flags: VBlankTiming.on | VBlankTiming.current,
                            lastSequence: anchorSequence, lastTimestampNs: anchorNs, anchorSequence: anchorSequence,
                            anchorNs: anchorNs, periodWholeNs: split.whole, periodFraction: split.fraction,
                            refreshMillihertz: 59_940, updatedNs: anchorNs)
    }

    @Test func theFractionKeepsAnHourAheadWithinANanosecond() {
        let period = 1e9 * 1001 / 60_000  // 16683333.33… ns
        let split = VBlankTiming.split(periodNs: period)
        #expect(split.whole == 16_683_333)
        let t = Self.ntsc()
        #expect(abs(t.periodNs - period) < 1e-6)
        // An hour of frames: whole ns alone would be 0.33 ns × 215,784 frames ≈ 72 µs off.
        let frames: UInt64 = 215_784
        let exact = 10_000_000_000 + Double(frames) * period
        #expect(abs(Double(t.timestamp(ofSequence: 1_000 + frames)) - exact) <= 1)
    }

    @Test(arguments: [0, 1, 8_000_000, 16_683_333, 16_683_334, 500_000_000_000] as [UInt64])
    func nextIsTheFirstVBlankStrictlyAfter(offset: UInt64) throws {
        let t = Self.ntsc()
        let time = 10_000_000_000 + offset
        let next = try #require(t.nextVBlank(after: time))
        #expect(next.timestampNs > time)
        #expect(t.timestamp(ofSequence: next.sequence - 1) <= time, "a vblank between \(time) and \(next)")
        #expect(next.timestampNs == t.timestamp(ofSequence: next.sequence))
    }

    @Test func beforeTheAnchorCountsBack() throws {
        let t = Self.ntsc()
        let next = try #require(t.nextVBlank(after: 10_000_000_000 - 20_000_000))  // 1.2 frames before
        #expect(next.sequence == 999)
        #expect(next.timestampNs == 10_000_000_000 - 16_683_333)
    }

    @Test func noPeriodNoPrediction() {
        var t = Self.ntsc()
        t.periodWholeNs = 0
        t.periodFraction = 0
        #expect(t.nextVBlank(after: 1) == nil)
        #expect(VBlankTiming.split(periodNs: .nan).whole == 0 && VBlankTiming.split(periodNs: .nan).fraction == 0)
    }
}
