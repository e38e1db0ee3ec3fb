import TestSupport
import Testing
@testable import VsyncCore

@Suite("Percentiles")
struct PercentilesTests {
    @Test("nearest rank on 1…100: p50 = 50, p99 = 99, max = 100")
    func oneToHundred() {
        let p = Percentiles((1...100).reversed().map(Double.init))!
        #expect(p.count == 100 && p.min == 1 && p.p50 == 50 && p.p99 == 99 && p.max == 100)
    }

    @Test("small samples: ranks round up")
    func small() {
        let three = Percentiles([3, 1, 2])!
        #expect(three.p50 == 2 && three.p99 == 3 && three.max == 3)
        let one = Percentiles([7.5])!
        #expect(one.min == 7.5 && one.p50 == 7.5 && one.p99 == 7.5 && one.max == 7.5)
        #expect(Percentiles.nearestRank(0, sorted: [1, 2]) == 1)
        #expect(Percentiles.nearestRank(100, sorted: [1, 2]) == 2)
    }

    @Test("empty and all-NaN give nil; NaNs are dropped")
    func emptyAndNaN() {
        #expect(Percentiles([]) == nil)
        #expect(Percentiles([.nan]) == nil)
        #expect(Percentiles([.nan, 4, 2])! == Percentiles([2, 4])!)
    }

    @Test("on random samples the result has the nearest-rank property")
    func property() {
        var rng = SplitMix64(seed: 0x5EED_0007)
        for _ in 0..<300 {
            let n = 1 + Int(rng.next() % 500)
            let values = (0..<n).map { _ in Double(rng.next() % 50) }  // many ties
            let p = Percentiles(values)!
            for (percent, v) in [(50.0, p.p50), (99.0, p.p99)] {
                // At least p % of the values are ≤ v, and fewer than p % are < v.
                let atOrBelow = values.filter { $0 <= v }.count
                let below = values.filter { $0 < v }.count
                #expect(Double(atOrBelow) * 100 >= percent * Double(n))
                #expect(Double(below) * 100 < percent * Double(n))
            }
            #expect(p.max == values.max() && p.min == values.min())
        }
    }
}
