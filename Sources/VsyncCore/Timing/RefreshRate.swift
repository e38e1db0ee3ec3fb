/// A refresh rate kept exactly, as the rational `numerator / denominator` hertz.
///
/// Mode timings give the rate as pixel clock over pixels per frame; keeping the fraction
/// (rather than the kernel's rounded `vrefresh`) is what tells 59.94 Hz from 60 Hz.
public struct RefreshRate: Sendable, Hashable, Codable, Comparable, CustomStringConvertible {
    public let numerator: UInt64
    public let denominator: UInt64

    public init(numerator: UInt64, denominator: UInt64) {
        precondition(denominator > 0, "RefreshRate with a zero denominator")
        let g = Self.gcd(numerator, denominator)
        self.numerator = numerator / g
        self.denominator = denominator / g
    }

    /// A rate given in hertz, kept to the nanohertz. For the timer source and for tests.
    public init(hertz: Double) {
        precondition(hertz > 0 && hertz.isFinite, "RefreshRate(hertz:) needs a positive rate")
        self.init(numerator: UInt64((hertz * 1e9).rounded()), denominator: 1_000_000_000)
    }

    /// Decoding goes through `init(numerator:denominator:)`, so a zero denominator is refused
    /// and the fraction is reduced (keeping `==` exact).
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let n = try c.decode(UInt64.self, forKey: .numerator)
        let d = try c.decode(UInt64.self, forKey: .denominator)
        guard d > 0 else {
            throw DecodingError.dataCorruptedError(forKey: .denominator, in: c, debugDescription: "refresh rate denominator is 0")
        }
        self.init(numerator: n, denominator: d)
    }

    public var hertz: Double { Double(numerator) / Double(denominator) }
    /// Millihertz, rounded: the unit the wire protocol and wlroots use.
    public var millihertz: UInt64 {
        // Full-width so a rate given to the nanohertz (numerator up to ~1.8e19) cannot overflow.
        let scaled = numerator.multipliedFullWidth(by: 1000)
        let (low, carry) = scaled.low.addingReportingOverflow(denominator / 2)
        let high = scaled.high + (carry ? 1 : 0)
        guard high < denominator else { return .max }
        return denominator.dividingFullWidth((high, low)).quotient
    }
    /// The frame period in nanoseconds, not rounded.
    public var periodNanoseconds: Double { 1e9 * Double(denominator) / Double(numerator) }

    public static func < (a: RefreshRate, b: RefreshRate) -> Bool {
        // Compare a.n/a.d < b.n/b.d without overflow.
        a.numerator.multipliedFullWidth(by: b.denominator) < b.numerator.multipliedFullWidth(by: a.denominator)
    }

    public var description: String {
        let mhz = millihertz
        let frac = String(mhz % 1000)
        return "\(mhz / 1000).\(String(repeating: "0", count: 3 - frac.count))\(frac) Hz"
    }

    private static func gcd(_ a: UInt64, _ b: UInt64) -> UInt64 {
        var (a, b) = (a, b)
        while b != 0 { (a, b) = (b, a % b) }
        return a == 0 ? 1 : a
    }
}
