import Foundation  // JSONEncoder
import TestSupport
import Testing
@testable import VsyncCore

@Suite("Rate mapping")
struct RateMappingTests {
    /// (refresh Hz, minimum, maximum, preferred, expected divisor): the table in RateMapping's
    /// doc comment, each row worked out by hand from the rules there.
    static let table: [(refresh: Double, min: Float, max: Float, pref: Float, d: UInt32)] = [
        (60, 0, 0, 0, 1), (60, 0, 0, 90, 1), (60, 0, 0, 30, 2), (60, 0, 0, 25, 2), (60, 0, 0, 24, 3),
        (60, 0, 0, 45, 1), (60, 0, 0, 44, 2), (60, 0, 0, 1, 60), (60, 0, 0, 15, 4), (60, 0, 0, 12, 5),
        (60, 15, 30, 24, 3), (60, 10, 25, 0, 3), (60, 80, 120, 0, 1), (60, 40, 50, 45, 1),
        (59.94, 0, 0, 30, 2), (59.94, 29.97, 29.97, 29.97, 2), (59.94, 0, 0, 59.94, 1), (59.94, 0, 0, 60, 1),
        (120, 0, 0, 60, 2), (120, 0, 0, 40, 3), (120, 0, 0, 24, 5), (120, 0, 0, 0, 1),
        (144, 0, 0, 60, 2), (144, 0, 0, 30, 5), (144, 0, 60, 0, 3), (144, 48, 72, 60, 2), (144, 0, 0, 144, 1),
        (75, 0, 0, 30, 3), (75, 0, 0, 60, 1), (75, 0, 0, 37.5, 2), (75, 20, 30, 0, 3),
    ]

    @Test("the documented table", arguments: table.indices)
    func documentedTable(index: Int) throws {
        let row = Self.table[index]
        let range = try FrameRateRange(minimum: row.min, maximum: row.max, preferred: row.pref)
        #expect(RateMapping.divisor(for: range, refreshHz: row.refresh) == row.d,
                "\(row.refresh) Hz, \(range): want d = \(row.d)")
    }

    @Test("CADisplayLink's rule at 60 Hz: 26…35 → 30, above 60 → 60, 0 → 60; delivered rates are 60/d")
    func cadisplayLinkRatesAt60Hz() {
        for fps in 26...35 { #expect(RateMapping.divisor(preferredFramesPerSecond: fps, refreshHz: 60) == 2, "fps \(fps)") }
        for fps in [61, 90, 120, 1000] { #expect(RateMapping.divisor(preferredFramesPerSecond: fps, refreshHz: 60) == 1) }
        #expect(RateMapping.divisor(preferredFramesPerSecond: 0, refreshHz: 60) == 1)
        #expect(RateMapping.divisor(preferredFramesPerSecond: -5, refreshHz: 60) == 1)
        // Requests of 10…60 fps land on d = 1…6: 60, 30, 20, 15, 12, 10 Hz, nothing else.
        let divisors = Set((10...60).map { RateMapping.divisor(preferredFramesPerSecond: $0, refreshHz: 60) })
        #expect(divisors == Set(1...6))
        // Lower requests reach lower rates, each still 60/d for a whole d (e.g. 8 fps → 7.5 Hz, d = 8).
        #expect(RateMapping.divisor(preferredFramesPerSecond: 8, refreshHz: 60) == 8)
        #expect(RateMapping.divisor(preferredFramesPerSecond: 9, refreshHz: 60) == 7)  // 8.57 Hz is 0.43 away, 7.5 is 1.5
    }

    @Test("Android's tolerance: within 0.0009 relative counts as the divisor, beyond it does not")
    func tolerance() throws {
        // 60 Hz / 2 = 30; 29.98 is 0.067 % off → d = 2 even with the range pinned to it.
        #expect(RateMapping.divisor(for: try FrameRateRange(minimum: 29.98, maximum: 29.98, preferred: 29.98), refreshHz: 60) == 2)
        // A minimum of 30.02 (0.067 % above 30) still admits 30: d = 2, not the 60 a strict bound gives.
        #expect(RateMapping.divisor(for: try FrameRateRange(minimum: 30.02, maximum: 60, preferred: 30.02), refreshHz: 60) == 2)
        // 30.1 is 0.33 % above 30, beyond the tolerance. In [30.1, 59] no candidate is inside
        // (30 below, 60 above); 30 is the nearer one. In [30.1, 60] only 60 is inside.
        #expect(RateMapping.divisor(for: try FrameRateRange(minimum: 30.1, maximum: 59, preferred: 30.1), refreshHz: 60) == 2)
        #expect(RateMapping.divisor(for: try FrameRateRange(minimum: 30.1, maximum: 60, preferred: 30.1), refreshHz: 60) == 1)
        // On 59.94 Hz, asking for exactly 30 within [30, 30]: 29.97 is 0.1 % off (beyond 0.0009),
        // so nothing is inside; the nearest candidate to the range is 29.97.
        #expect(RateMapping.divisor(for: try FrameRateRange(minimum: 30, maximum: 30, preferred: 30), refreshHz: 59.94) == 2)
    }

    @Test("bad refresh values give 1; divisors stay at ≥ 1 Hz")
    func degenerate() {
        for hz in [0, -60, .nan, .infinity, 0.5] {
            #expect(RateMapping.divisor(preferredFramesPerSecond: 1, refreshHz: hz) == 1)
        }
        #expect(RateMapping.maximumDivisor(refreshHz: 60) == 60)
        #expect(RateMapping.maximumDivisor(refreshHz: 59.94) == 59)
        #expect(RateMapping.divisor(for: .default, refreshHz: 240) == 1)
        // Preferring 0.2 fps at 60 Hz: capped at 1 Hz.
        #expect(RateMapping.divisor(for: try! FrameRateRange(minimum: 0, maximum: 0, preferred: 0.2), refreshHz: 60) == 60)
    }

    /// The rules, checked from outside on random ranges: the answer is in the range if any
    /// candidate is, and no in-range candidate is nearer the preferred rate (or, with
    /// preferred 0, higher).
    @Test("random ranges obey the rules", arguments: [60, 59.94, 75, 120, 144, 165, 240])
    func randomRanges(refresh: Double) throws {
        var rng = SplitMix64(seed: 0x5EED_0008 ^ UInt64(refresh * 1000))
        let tol = RateMapping.divisorTolerance
        for _ in 0..<2000 {
            var a = Float(rng.unitInterval() * 300), b = Float(rng.unitInterval() * 300)
            if a > b { swap(&a, &b) }
            if rng.next() % 4 == 0 { b = 0 }                 // no upper bound
            if rng.next() % 4 == 0 { a = 0 }
            let hi = b == 0 ? Float(400) : b
            let pref = rng.next() % 3 == 0 ? 0 : a + Float(rng.unitInterval()) * (hi - a)
            let range = try FrameRateRange(minimum: a, maximum: b, preferred: pref)
            let d = RateMapping.divisor(for: range, refreshHz: refresh)
            let rates = (1...RateMapping.maximumDivisor(refreshHz: refresh)).map { refresh / Double($0) }
            func inside(_ r: Double) -> Bool {
                let maxR = b == 0 ? Double.infinity : Double(b)
                return (r >= Double(a) || abs(r - Double(a)) <= tol * r) && (r <= maxR || abs(r - maxR) <= tol * r)
            }
            let chosen = refresh / Double(d)
            #expect(d >= 1 && d <= rates.count)
            if rates.contains(where: inside) {
                #expect(inside(chosen), "\(refresh) Hz \(range) → \(chosen) is outside")
                for r in rates where inside(r) {
                    if pref > 0 {
                        let dr = abs(r - Double(pref)) <= tol * r ? 0 : abs(r - Double(pref))
                        let dc = abs(chosen - Double(pref)) <= tol * chosen ? 0 : abs(chosen - Double(pref))
                        #expect(dc <= dr + 1e-6, "\(refresh) Hz \(range) → \(chosen), but \(r) is nearer")
                    } else {
                        #expect(chosen >= r, "\(refresh) Hz \(range) → \(chosen), but \(r) is higher")
                    }
                }
            } else {
                // Nothing inside: no candidate is nearer the range than the chosen one.
                func outside(_ r: Double) -> Double { r < Double(a) ? Double(a) - r : (b > 0 && r > Double(b) ? r - Double(b) : 0) }
                #expect(rates.allSatisfy { outside(chosen) <= outside($0) + 1e-6 }, "\(refresh) Hz \(range) → \(chosen)")
            }
        }
    }

    @Test("ticks fall on multiples of the divisor, the same vblanks for every client at one rate")
    func tickDue() {
        let sequences = (farSequenceBase..<farSequenceBase + 600)
        for d in [UInt32(1), 2, 3, 4, 7] {
            let due = sequences.filter { RateMapping.isTickDue(sequence: $0, divisor: d) }
            #expect(due.count == 600 / Int(d) || due.count == 600 / Int(d) + 1)
            #expect(due.allSatisfy { $0 % UInt64(d) == 0 })
            #expect(zip(due, due.dropFirst()).allSatisfy { $1 - $0 == UInt64(d) })
        }
        #expect(RateMapping.isTickDue(sequence: 7, divisor: 0))  // 0 is read as 1
        #expect(RateMapping.deliveredHz(refreshHz: 144, divisor: 5) == 28.8)
    }
}

@Suite("Frame rate range")
struct FrameRateRangeTests {
    @Test("default is 0/0/0")
    func defaults() {
        #expect(FrameRateRange.default.minimum == 0 && FrameRateRange.default.maximum == 0 && FrameRateRange.default.preferred == 0)
        #expect(FrameRateRange(preferredFramesPerSecond: 30).preferred == 30)
        #expect(FrameRateRange(preferredFramesPerSecond: -1) == .default)
    }

    @Test("invalid ranges are refused with a message",
          arguments: [(Float(-1), Float(0), Float(0)), (.nan, 0, 0), (0, .infinity, 0), (60, 30, 0), (10, 30, 45), (10, 30, 5), (0, 0, -3)])
    func invalid(min: Float, max: Float, pref: Float) {
        #expect(throws: FrameRateRange.Invalid.self) { try FrameRateRange(minimum: min, maximum: max, preferred: pref) }
        #expect(FrameRateRange.problem(minimum: min, maximum: max, preferred: pref)?.isEmpty == false)
    }

    @Test("valid edge cases are accepted", arguments: [(Float(0), Float(0), Float(0)), (30, 0, 500), (30, 30, 30), (10, 60, 0)])
    func valid(min: Float, max: Float, pref: Float) throws {
        let r = try FrameRateRange(minimum: min, maximum: max, preferred: pref)
        #expect(r.minimum == min && r.maximum == max && r.preferred == pref)
    }

    @Test("Codable round trip; decoding validates")
    func codable() throws {
        let r = try FrameRateRange(minimum: 10, maximum: 60, preferred: 30)
        #expect(try JSONDecoder().decode(FrameRateRange.self, from: JSONEncoder().encode(r)) == r)
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode(FrameRateRange.self, from: Data(#"{"minimum":60,"maximum":30,"preferred":0}"#.utf8))
        }
    }
}
