import Testing
@testable import VsyncCore

@Suite("Sequence widener")
struct SequenceWidenerTests {
    @Test("the first value is taken as is")
    func firstValue() {
        var w = SequenceWidener()
        #expect(w.newest == nil)
        #expect(w.widen(12345) == 12345)
        #expect(w.newest == 12345)
    }

    @Test("counts on across several wraps")
    func severalWraps() {
        var w = SequenceWidener()
        var expected = UInt64(UInt32.max - 10)
        _ = w.widen(UInt32(expected))
        // Steps of 2²⁰ + 7 cross the 32-bit boundary every ~4096 steps; go past 3 wraps.
        let step: UInt64 = (1 << 20) + 7
        for _ in 0..<13_000 {
            expected += step
            #expect(w.widen(UInt32(truncatingIfNeeded: expected)) == expected)
        }
        #expect(expected > 3 << 32)
    }

    @Test("a small step back is an older event, not a wrap")
    func stepBack() {
        var w = SequenceWidener()
        _ = w.widen(1000)
        #expect(w.widen(1001) == 1001)
        #expect(w.widen(998) == 998)
        #expect(w.newest == 1001)  // the older event does not move the newest
        #expect(w.widen(1002) == 1002)
    }

    @Test("a step back across the wrap lands before 2³²")
    func stepBackAcrossWrap() {
        var w = SequenceWidener()
        _ = w.widen(UInt32.max - 1)
        #expect(w.widen(1) == (1 << 32) + 1)
        #expect(w.widen(UInt32.max) == UInt64(UInt32.max))
        #expect(w.widen(2) == (1 << 32) + 2)
    }

    @Test("a step back before zero saturates at 0; reset forgets")
    func saturateAndReset() {
        var w = SequenceWidener()
        _ = w.widen(3)
        #expect(w.widen(UInt32.max - 5) == 0)  // 9 back from 3
        #expect(w.newest == 3)
        w.reset()
        #expect(w.newest == nil)
        #expect(w.widen(UInt32.max - 5) == UInt64(UInt32.max - 5))
    }
}
