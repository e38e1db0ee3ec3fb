import Testing
import VsyncCore

/// A replay's SPEED compresses the trace's timeline onto the daemon's clock: times / SPEED,
/// rates × SPEED, exactly where the fraction allows.
@Suite("Replay speed")
struct ReplaySpeedTests {
    @Test(arguments: [("4", 4, 1), ("0.5", 1, 2), ("1.25", 5, 4), ("10", 10, 1), ("1.000001", 1_000_001, 1_000_000)])
    func readsPlainDecimals(text: String, numerator: UInt64, denominator: UInt64) throws {
        let speed = try #require(ReplaySpeed(Substring(text)))
        #expect(speed.numerator == numerator && speed.denominator == denominator)
    }

    @Test(arguments: ["", ".5", "1.", "1e2", "-1", "+2", "0x10", "1.0000001", "inf", "nan", "1,5"])
    func refusesAnythingElse(text: String) {
        #expect(ReplaySpeed(Substring(text)) == nil)
    }

    @Test func compressesTraceTimeToTheNearestNanosecond() throws {
        let four = try #require(ReplaySpeed("4"))
        // vkms's 60 Hz period is 16665600 ns: a quarter of it exactly.
        #expect(four.compress(16_665_600) == 4_166_400)
        #expect(four.compress(16_665_600 * 299) == 4_166_400 * 299)
        #expect(four.compress(6) == 2 && four.compress(5) == 1)  // 1.5 rounds up, 1.25 down
        let third = try #require(ReplaySpeed("1.5"))
        #expect(third.compress(3_000_000_000) == 2_000_000_000)
        // Hours of trace at a fine fraction: no overflow.
        let fine = try #require(ReplaySpeed("0.000001"))
        #expect(fine.compress(3_600_000_000_000) == 3_600_000_000_000 * 1_000_000)
        #expect(ReplaySpeed.one.compress(123_456_789) == 123_456_789)
    }

    @Test func scalesRatesExactly() throws {
        let four = try #require(ReplaySpeed("4"))
        let vkms = RefreshRate(numerator: 78125, denominator: 1302)
        let fast = four.scale(vkms)
        #expect(fast == RefreshRate(numerator: 312_500, denominator: 1302))
        #expect(fast.periodNanoseconds == vkms.periodNanoseconds / 4)
        let half = try #require(ReplaySpeed("0.5"))
        #expect(half.scale(RefreshRate(numerator: 60, denominator: 1)) == RefreshRate(numerator: 30, denominator: 1))
    }

    @Test func scalesTheVariableRefreshRange() throws {
        let two = try #require(ReplaySpeed("2"))
        let state = VariableRefreshState(capable: true, enabled: true, range: EDIDRefreshRange(minimumHz: 48, maximumHz: 144))
        let fast = two.scale(state)
        #expect(fast.range == EDIDRefreshRange(minimumHz: 96, maximumHz: 288) && fast.capable && fast.enabled)
        #expect(ReplaySpeed.one.scale(state) == state)
        #expect(two.scale(VariableRefreshState(capable: false, enabled: false)).range == nil)
    }
}
