import Testing

@testable import VsyncCore

/// The old mode's tail after a mode set was read early: scripted vblanks, no kernel.
@Suite("Mode set tail")
struct ModeSetTailTests {
    let p60 = 1e9 / 60, p144 = 1e9 / 144
    let last: (sequence: UInt64, timestampNs: UInt64) = (1_000, 50_000_000_000)

    /// A tail read `readAfterNs` after the old mode's last vblank read before it.
    func tail(old: Double, new: Double, readAfterNs: UInt64 = 5_000_000) -> ModeSetTail? {
        ModeSetTail(
            oldPeriodNs: old, newPeriodNs: new, lastSequence: last.sequence, lastTimestampNs: last.timestampNs,
            readNs: last.timestampNs + readAfterNs)
    }

    func at(_ frames: UInt64, _ period: Double, plus extraNs: Double = 0) -> UInt64 {
        last.timestampNs + UInt64((Double(frames) * period + extraNs).rounded())
    }

    @Test("60 → 144 Hz: the old grid's vblanks are held, a skipped one too; the first off it ends the tail for good")
    func holdsTheOldGridUntilItLeaves() throws {
        var t = try #require(tail(old: p60, new: p144))
        let held1 = t.holds(sequence: last.sequence + 1, timestampNs: at(1, p60, plus: 40_000))
        #expect(held1)
        let held2 = t.holds(sequence: last.sequence + 3, timestampNs: at(3, p60))
        #expect(held2)  // one went unread
        #expect(t.held == 2 && t.sequence == last.sequence + 3)
        // The new mode's first vblank after the commit's off and on: 30 ms on, the count going on.
        let first = at(3, p60, plus: 30_000_000)
        let held3 = t.holds(sequence: last.sequence + 6, timestampNs: first)
        #expect(!held3)
        #expect(t.held == 2 && t.sequence == last.sequence + 3, "a vblank not held leaves the tail as it was")
    }

    @Test("144 → 60 Hz: a vblank one new period on is not the old mode's")
    func newPeriodIsNotHeld() throws {
        var t = try #require(tail(old: p144, new: p60))
        let held4 = t.holds(sequence: last.sequence + 1, timestampNs: at(1, p144))
        #expect(held4)
        let held5 = t.holds(sequence: last.sequence + 2, timestampNs: at(1, p144, plus: p60))
        #expect(!held5)
    }

    @Test("off the old grid by more than the tolerance: not held")
    func offGridIsNotHeld() throws {
        var t = try #require(tail(old: p60, new: p144))
        let held6 = t.holds(sequence: last.sequence + 1, timestampNs: at(1, p60, plus: 0.03 * p60))
        #expect(!held6)
    }

    @Test("a count that restarted with the mode, or a stamp going back: not held")
    func restartedCountIsNotHeld() throws {
        var t = try #require(tail(old: p60, new: p144))
        let held7 = t.holds(sequence: 3, timestampNs: at(1, p60))
        #expect(!held7)
        let held8 = t.holds(sequence: last.sequence + 1, timestampNs: last.timestampNs - 1)
        #expect(!held8)
    }

    @Test("a tail is believed for one second after the read, no longer")
    func longestTail() throws {
        var t = try #require(tail(old: p60, new: p144))
        let frames = UInt64((Double(ModeSetTail.longestNs) + 5_000_000) / p60)
        let held9 = t.holds(sequence: last.sequence + frames, timestampNs: at(frames, p60))
        #expect(held9)
        let held10 = t.holds(sequence: last.sequence + frames + 1, timestampNs: at(frames + 1, p60))
        #expect(!held10)
    }

    @Test("modes whose periods a vblank cannot tell apart start no tail (60 → 59.94 Hz, a resolution change)")
    func indistinguishableModes() {
        #expect(tail(old: p60, new: 1e9 / 59.94) == nil)
        #expect(tail(old: p60, new: p60) == nil)
        #expect(tail(old: p60, new: 1e9 / 58.5) == nil)
        #expect(tail(old: p60, new: 1e9 / 75) != nil)
    }

    @Test("after a gap (events were asleep), a moved phase: the count says old periods went by, so held; new periods, not")
    func afterAGapTheCountDecides() throws {
        // Read 1.9 s after the last vblank events before they went to sleep.
        var t = try #require(tail(old: p60, new: p144, readAfterNs: 1_900_000_000))
        // 120 frames on, 3 ms off the old grid: a vblank timer restarted on enable.
        let held = t.holds(sequence: last.sequence + 120, timestampNs: at(120, p60, plus: 3_000_000))
        #expect(held)
        var u = try #require(tail(old: p60, new: p144, readAfterNs: 1_900_000_000))
        // The new mode's first vblank 2 s on, its count advanced by 144 Hz frames.
        let newFirst = u.holds(sequence: last.sequence + 288, timestampNs: at(120, p60))
        #expect(!newFirst)
        // Within the phase frames the grid still decides: 3 ms off two frames on is not held.
        var v = try #require(tail(old: p60, new: p144))
        let near = v.holds(sequence: last.sequence + 2, timestampNs: at(2, p60, plus: 3_000_000))
        #expect(!near)
    }
}
