import Foundation  // JSONEncoder
import Testing
@testable import VsyncCore

@Suite("Refresh rate and mode timings")
struct RefreshRateTests {
    /// Modes as the kernel lists them (clock in kHz, htotal, vtotal, flags, vscan), with the
    /// exact rate as clock·1000·(interlace 2) / (htotal·vtotal·(doublescan 2)·vscan).
    static let modes: [(name: String, clock: UInt32, htotal: UInt16, vtotal: UInt16, flags: UInt32, vscan: UInt16, num: UInt64, den: UInt64, mHz: UInt64)] = [
        ("CEA 1920x1080@60", 148_500, 2200, 1125, 0, 0, 148_500_000, 2_475_000, 60_000),
        ("CEA 1920x1080@59.94 (kernel's 148352 kHz)", 148_352, 2200, 1125, 0, 0, 148_352_000, 2_475_000, 59_940),
        ("CEA 1280x720@60", 74_250, 1650, 750, 0, 0, 74_250_000, 1_237_500, 60_000),
        ("CEA 3840x2160@60", 594_000, 4400, 2250, 0, 0, 594_000_000, 9_900_000, 60_000),
        ("DMT 1024x768@60", 65_000, 1344, 806, 0, 0, 65_000_000, 1_083_264, 60_004),
        ("CEA 1920x1080i@60 (interlace doubles)", 74_250, 2200, 1125, ModeTimings.flagInterlace, 0, 148_500_000, 2_475_000, 60_000),
        ("640x480 doublescan (halves)", 25_175, 800, 525, ModeTimings.flagDoubleScan, 0, 25_175_000, 840_000, 29_970),
        ("640x480 vscan 3 (divides)", 25_175, 800, 525, 0, 3, 25_175_000, 1_260_000, 19_980),
        ("640x480 vscan 1 (no effect)", 25_175, 800, 525, 0, 1, 25_175_000, 420_000, 59_940),
    ]

    @Test("exact rates of real modes", arguments: modes.indices)
    func exactRates(index: Int) {
        let m = Self.modes[index]
        let timings = ModeTimings(clockKHz: m.clock, hdisplay: 0, hsyncStart: 0, hsyncEnd: 0, htotal: m.htotal,
                                  vdisplay: 0, vsyncStart: 0, vsyncEnd: 0, vtotal: m.vtotal, vscan: m.vscan, flags: m.flags)
        let rate = timings.refreshRate!
        // Equal as fractions: cross-multiplied, no rounding anywhere.
        #expect(rate.numerator * m.den == rate.denominator * m.num, "\(m.name): \(rate.numerator)/\(rate.denominator)")
        #expect(rate.millihertz == m.mHz, "\(m.name)")
        #expect(rate == RefreshRate(numerator: m.num, denominator: m.den))
    }

    @Test("59.94 is told from 60, and the kernel's 148352 kHz mode from 60000/1001")
    func ordering() {
        let sixty = RefreshRate(numerator: 148_500_000, denominator: 2_475_000)
        let kernel5994 = RefreshRate(numerator: 148_352_000, denominator: 2_475_000)
        let ntsc = RefreshRate(numerator: 60_000, denominator: 1001)
        #expect(sixty.numerator == 60 && sixty.denominator == 1)
        #expect(ntsc < kernel5994 && kernel5994 < sixty && !(sixty < ntsc))
        #expect(abs(ntsc.hertz - 59.940_059_94) < 1e-8)
        #expect(ntsc.description == "59.940 Hz" && sixty.description == "60.000 Hz")
    }

    @Test("< compares fractions whose cross products overflow 64 bits, and ones Double cannot tell apart")
    func comparisonFullWidth() {
        let a = RefreshRate(numerator: UInt64.max - 1, denominator: UInt64.max)      // x/(x+1) grows with x
        let b = RefreshRate(numerator: UInt64.max - 2, denominator: UInt64.max - 1)
        #expect(b < a && !(a < b) && a != b)
        #expect(a.hertz == b.hertz)  // Double really cannot tell them apart
        let one = RefreshRate(numerator: 1_000_000_000_000_000_000, denominator: 1_000_000_000_000_000_000)
        let justAbove = RefreshRate(numerator: 1_000_000_000_000_000_001, denominator: 1_000_000_000_000_000_000)
        #expect(one < justAbove && !(justAbove < one) && !(one < one))
    }

    @Test("millihertz rounds half up and does not overflow on huge numerators")
    func millihertz() {
        #expect(RefreshRate(numerator: 1, denominator: 2000).millihertz == 1)   // 0.5 mHz
        #expect(RefreshRate(numerator: 1, denominator: 2001).millihertz == 0)
        // 18 000 000 000.000000007 Hz: n·1000 overflows 64 bits.
        #expect(RefreshRate(numerator: 18_000_000_000_000_000_007, denominator: 1_000_000_000).millihertz == 18_000_000_000_000)
        #expect(RefreshRate(hertz: 59.940144).millihertz == 59_940)
        #expect(abs(RefreshRate(hertz: 143.979676).periodNanoseconds - 1e9 / 143.979676) < 1e-6)
    }

    @Test("zero clock or total has no rate")
    func zero() {
        let t = ModeTimings(clockKHz: 0, hdisplay: 0, hsyncStart: 0, hsyncEnd: 0, htotal: 10, vdisplay: 0, vsyncStart: 0, vsyncEnd: 0, vtotal: 10)
        #expect(t.refreshRate == nil)
        var u = t
        u.clockKHz = 1000
        u.vtotal = 0
        #expect(u.refreshRate == nil)
    }

    @Test("custom modes land within one kHz of clock of the asked rate", arguments: [59.940144, 75.0, 143.979676, 240.0])
    func custom(hertz: Double) {
        let mode = ModeTimings.custom(hertz: hertz)
        let rate = mode.refreshRate!
        // Clock is a whole kHz: the rate is off by at most 500 Hz of clock / (htotal · vtotal).
        let bound = 500.0 / (Double(mode.htotal) * Double(mode.vtotal))
        #expect(abs(rate.hertz - hertz) <= bound)
        #expect(mode.hdisplay == 1024 && mode.vdisplay == 768)
    }

    @Test("Codable round trip; a zero denominator is refused when decoding")
    func codable() throws {
        let rate = RefreshRate(numerator: 148_352_000, denominator: 2_475_000)
        let data = try JSONEncoder().encode(rate)
        #expect(try JSONDecoder().decode(RefreshRate.self, from: data) == rate)
        let unreduced = try JSONDecoder().decode(RefreshRate.self, from: Data(#"{"numerator":120,"denominator":2}"#.utf8))
        #expect(unreduced == RefreshRate(numerator: 60, denominator: 1))
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode(RefreshRate.self, from: Data(#"{"numerator":60,"denominator":0}"#.utf8))
        }
        let mode = ModeTimings.custom(hertz: 75)
        #expect(try JSONDecoder().decode(ModeTimings.self, from: JSONEncoder().encode(mode)) == mode)
    }
}
