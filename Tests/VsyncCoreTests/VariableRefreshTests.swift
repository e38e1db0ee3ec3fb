import Testing
@testable import VsyncCore

/// The EDID range limits parser, and timing while variable refresh is on.
@Suite("Variable refresh")
struct VariableRefreshTests {
    /// The real Dell D1918H block with its range descriptor (bytes 108-125) rewritten to
    /// `bytes` after the tag, and the checksum redone: what a high-rate monitor's block holds.
    static func withRange(_ descriptor: [UInt8]) -> [UInt8] {
        var e = Array(EDIDTests.dellD1918H.prefix(128))
        let at = try! #require(stride(from: 54, to: 126, by: 18).first { e[$0 + 3] == 0xFD })
        e.replaceSubrange((at + 4)..<(at + 4 + descriptor.count), with: descriptor)
        e[127] = 0
        e[127] = UInt8(truncatingIfNeeded: 256 - Int(e[0..<127].reduce(UInt8(0)) { $0 &+ $1 }))
        return e
    }

    @Test func aRealMonitorsRange() throws {
        // The D1918H's descriptor: 00 00 00 fd 00 38 4b 1e 53 09 …: 56-75 Hz vertical.
        let range = try #require(EDIDRefreshRange(EDIDTests.dellD1918H))
        #expect(range == EDIDRefreshRange(minimumHz: 56, maximumHz: 75))
        #expect(range.shortestIntervalNs == 13_333_333 && range.longestIntervalNs == 17_857_143)
    }

    /// Byte 4's offsets (EDID 1.4): 10 adds 255 to the maximum, 11 to both; 01 is reserved.
    @Test func ratesAbove255HzUseTheOffsetFlags() throws {
        #expect(EDIDRefreshRange(Self.withRange([0x02, 48, 105])) == EDIDRefreshRange(minimumHz: 48, maximumHz: 360))
        #expect(EDIDRefreshRange(Self.withRange([0x03, 5, 245])) == EDIDRefreshRange(minimumHz: 260, maximumHz: 500))
        #expect(EDIDRefreshRange(Self.withRange([0x01, 48, 144])) == EDIDRefreshRange(minimumHz: 48, maximumHz: 144))
        #expect(EDIDRefreshRange(Self.withRange([0x0A, 48, 105]))?.maximumHz == 360, "bits 2-3 are the horizontal offsets")
        #expect(EDIDRefreshRange(minimumHz: 48, maximumHz: 360).shortestIntervalNs == 2_777_778)
    }

    @Test func noRangeOrNotAnEDIDIsNil() {
        #expect(EDIDRefreshRange(EDIDTests.bare()) == nil, "no 0xFD descriptor")
        #expect(EDIDRefreshRange(Self.withRange([0x00, 0, 75])) == nil, "a minimum of 0")
        #expect(EDIDRefreshRange(Self.withRange([0x00, 80, 75])) == nil, "minimum above maximum")
        var bad = EDIDTests.dellD1918H
        bad[20] ^= 1
        #expect(EDIDRefreshRange(bad) == nil, "bad checksum")
        #expect(EDIDRefreshRange(Array(EDIDTests.dellD1918H.prefix(100))) == nil)
    }

    @Test func theShortestIntervalIsNeverUnderTheModesPeriod() {
        let range = EDIDRefreshRange(minimumHz: 48, maximumHz: 144)
        let at144 = VariableRefreshTiming(range: range, modePeriodNs: 1e9 / 144)
        #expect(at144.shortestNs == 6_944_444 && at144.longestNs == 20_833_333)
        // A 120 Hz mode on that monitor: VRR only lengthens frames.
        #expect(VariableRefreshTiming(range: range, modePeriodNs: 1e9 / 120).shortestNs == 8_333_333)
        // No range in the EDID: the mode's period, longest unknown.
        let unknown = VariableRefreshTiming(range: nil, modePeriodNs: 1e9 / 144)
        #expect(unknown.shortestNs == 6_944_444 && unknown.longestNs == 0)
        #expect(VariableRefreshState(capable: true, enabled: true).isOn)
        #expect(!VariableRefreshState(capable: false, enabled: true).isOn, "VRR_ENABLED set on a monitor that cannot")
    }

    /// A game's frame times under VRR (as Tests/Traces/vrr-game-stutter.trace): the refresh
    /// model would take them for new periods (restarts, each a generation), which is why the
    /// daemon does not feed it while VRR is on; the earliest-vblank prediction is never after
    /// the vblank that came.
    @Test func underVRRPredictionsAreTheEarliestAndTheModelWouldRestart() {
        var lcg: UInt32 = 23
        func uniform() -> Double { lcg = 1_664_525 &* lcg &+ 1_013_904_223; return Double(lcg) / 4_294_967_296 }
        let timing = VariableRefreshTiming(range: EDIDRefreshRange(minimumHz: 48, maximumHz: 144), modePeriodNs: 1e9 / 144)
        var model = RefreshModel(nominalPeriodNs: 1e9 / 144)
        // What the daemon keeps under VRR: the newest vblank, not fitted.
        var tracker = RefreshModel(nominalPeriodNs: 1e9 / 144)
        var t = farTimestampBase, s = farSequenceBase
        var late = 0
        for i in 0..<400 {
            let frame = i % 33 == 0 ? 40e6 : 6.9e6 + uniform() * 18.1e6
            let next = t + UInt64(min(max(frame, Double(timing.shortestNs)), Double(timing.longestNs)))
            if let last = tracker.newest, next < timing.earliest(sequence: s + 1, after: last) { late += 1 }
            s += 1; t = next
            let taken = tracker.addUnfitted(sequence: s, timestampNs: t)
            #expect(taken)
            model.add(sequence: s, timestampNs: t)
        }
        #expect(late == 0)
        #expect(model.periodRestartCount + model.restartCount > 0, "the model saw VRR's intervals as changes")
        // The kernel repeating the last vblank (a CRTC going off) is not a new one.
        let repeated = tracker.addUnfitted(sequence: s, timestampNs: t)
        let tooSoon = tracker.addUnfitted(sequence: s + 1, timestampNs: t + 100_000)
        #expect(!repeated && !tooSoon)
        #expect(tracker.newest?.sequence == s && tracker.newest?.timestampNs == t && tracker.sampleCount == 0, "kept, not fitted")
        #expect(timing.earliest(sequence: s + 3, after: (s, t)) == t + 3 * 6_944_444)
    }

    /// A paced subscription under VRR woken late (the daemon busy past the earliest vblank):
    /// on a grid that frame is gone and passed over; without one the display is still waiting
    /// for it, so it is handed out at once, nothing counted skipped, and the next frame is
    /// aimed only from the vblank that comes.
    @Test func aLatePacedWakeUnderVRRPassesNothingOver() throws {
        let timing = VariableRefreshTiming(range: EDIDRefreshRange(minimumHz: 48, maximumHz: 144), modePeriodNs: 1e9 / 144)
        let last: (sequence: UInt64, timestampNs: UInt64) = (100, farTimestampBase)
        let predict = { (s: UInt64) in timing.earliest(sequence: s, after: last) }
        let late = last.timestampNs + 10_000_000  // past the earliest next vblank (6.9 ms)
        var grid = FramePacer(), variable = FramePacer()
        _ = grid.update(divisor: 1, workDurationNs: 3_000_000, latestSequence: 100, nowNs: late,
                        periodNs: Double(timing.shortestNs), predict: predict)
        let wake = variable.update(divisor: 1, workDurationNs: 3_000_000, latestSequence: 100, nowNs: late,
                                   periodNs: Double(timing.shortestNs), variable: true, predict: predict)
        #expect(try #require(grid.target).sequence > 101, "on a grid the late frame is walked past")
        #expect(variable.target?.sequence == 101 && wake <= late)
        let firing = variable.fire(nowNs: late, newestSequence: 100, periodNs: Double(timing.shortestNs), variable: true)
        let fired = try #require(firing)
        #expect(fired.frame.sequence == 101 && fired.skipped == 0)
        #expect(fired.frame.presentationNs == last.timestampNs + timing.shortestNs, "the target stays the earliest")
        // Its vblank came: the frame is no longer news.
        _ = variable.update(divisor: 1, workDurationNs: 3_000_000, latestSequence: 101, nowNs: late,
                            periodNs: Double(timing.shortestNs), variable: true, predict: predict)
        let stale = variable.fire(nowNs: late + 20_000_000, newestSequence: 102, periodNs: Double(timing.shortestNs), variable: true)
        #expect(stale == nil)
    }

    @Test func theTightestClockPairIsKept() {
        var reads: [UInt64] = [100, 190, 1_000, 1_010, 5_000, 9_000]
        var realtimes: [UInt64] = [11, 22, 33]
        let pair = ClockPair.tightest(tries: 3, monotonic: { reads.removeFirst() }, realtime: { realtimes.removeFirst() })
        // Widths 90, 10 and 4000: the second sample, at its midpoint.
        #expect(pair == ClockPair(monotonicNs: 1_005, realtimeNs: 22))
    }
}
