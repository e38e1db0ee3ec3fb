@testable import VsyncCore

/// Parses "01 00 30 00 …" (whitespace and newlines ignored) into bytes.
func hexBytes(_ s: String) -> [UInt8] {
    let digits = s.filter { !$0.isWhitespace }
    precondition(digits.count % 2 == 0, "odd hex string")
    var out: [UInt8] = []
    var i = digits.startIndex
    while i < digits.endIndex {
        let j = digits.index(i, offsetBy: 2)
        out.append(UInt8(digits[i..<j], radix: 16)!)
        i = j
    }
    return out
}

func sampleDisplay(id: UInt32 = 7, name: String = "Virtual-1") -> DisplayInfo {
    DisplayInfo(
        displayID: id, crtcID: 36, connectorID: 35, state: .on, flags: [.hardwareClock, .primary],
        refreshMillihertz: 59_940, periodNs: 16_683_350, width: 1024, height: 768,
        connectorName: name, deviceName: "card0")
}

func sampleTick() -> Tick {
    Tick(
        subscriptionID: 1, displayID: 2, sequence: 0x10, timestampNs: 1_000_000_000,
        targetTimestampNs: 1_033_333_333, displayIntervalNs: 16_666_667, clientIntervalNs: 33_333_333,
        skipped: 3, divisor: 2, flags: .synthetic)
}

/// A valid range for tests (FrameRateRange's init throws on invalid ones).
func rateRange(_ minimum: Float, _ maximum: Float, _ preferred: Float) -> FrameRateRange {
    try! FrameRateRange(minimum: minimum, maximum: maximum, preferred: preferred)
}
