/// Fixed-point decimal text for rates and times, so this module needs no Foundation
/// (`String(format:)` would pull Foundation and ICU into vsyncd and every DisplayLink app).
public enum DecimalText {
    /// `value` with exactly `places` decimals (0…9), rounded half away from zero: 59.94 with 3 → "59.940".
    public static func fixed(_ value: Double, places: Int) -> String {
        let places = min(max(places, 0), 9)
        var scale: UInt64 = 1
        for _ in 0..<places { scale *= 10 }
        let scaled = (abs(value) * Double(scale)).rounded()
        guard scaled.isFinite, scaled < 1e18 else { return "\(value)" }
        let units = UInt64(scaled)
        let sign = value < 0 && units > 0 ? "-" : ""
        guard places > 0 else { return "\(sign)\(units)" }
        let frac = String(units % scale)
        return "\(sign)\(units / scale).\(String(repeating: "0", count: places - frac.count))\(frac)"
    }
}
