import Foundation
import Testing
import VsyncCore

/// `DecimalText` replaces `String(format: "%.Nf")` in VsyncCore; it must print the same.
struct DecimalTextTests {
    @Test(arguments: [0, 1, 3, 6])
    func matchesPrintfOnRatesAndTimes(places: Int) {
        var rng = SystemRandomNumberGenerator()
        var values: [Double] = [0, 1, 59.94, 59.940019, 60.00384, 75.000210, 143.999, 144.000235, 999.9999995, 1e-7, 0.5]
        for _ in 0..<2_000 { values.append(Double.random(in: 0..<2_000, using: &rng)) }
        for value in values {
            let ours = DecimalText.fixed(value, places: places)
            let printf = String(format: "%.\(places)f", value)
            // printf rounds the exact binary value half-to-even; ours rounds value·10^places half
            // away from zero. They may differ only where value·10^places is within a hair of .5.
            let scaled = value * pow(10, Double(places))
            guard abs(scaled - scaled.rounded(.down) - 0.5) > 1e-6 else { continue }
            #expect(ours == printf, "\(value) with \(places) places")
        }
    }

    @Test func negativeAndZeroPlaces() {
        #expect(DecimalText.fixed(-1.25, places: 1) == "-1.3")
        #expect(DecimalText.fixed(-0.0001, places: 2) == "0.00")
        #expect(DecimalText.fixed(2.5, places: 0) == "3")
        #expect(DecimalText.fixed(.infinity, places: 3) == "inf")
    }
}
