/// How much faster than recorded a trace is replayed (`vsyncd --source replay:FILE@SPEED`), as
/// a fraction, so that a replay's rates and times scale exactly: `1.5` is 3/2.
///
/// A replay compresses the trace's timeline onto CLOCK_MONOTONIC: trace time t is at
/// start + (t − t₀) / SPEED, and that is also a vblank's timestamp, so ticks are times a client
/// can compare with its own clock. What the client sees is then a display SPEED times as fast:
/// intervals / SPEED, the mode's refresh and the variable refresh range's rates × SPEED; the
/// sequence numbers are the trace's.
public struct ReplaySpeed: Sendable, Equatable, CustomStringConvertible {
    public let numerator: UInt64
    public let denominator: UInt64

    public static let one = ReplaySpeed(numerator: 1, denominator: 1)

    /// At most this many decimal places: a finer speed means nothing for a replay.
    public static let maxDecimals = 6

    public init(numerator: UInt64, denominator: UInt64) {
        precondition(denominator > 0, "ReplaySpeed with a zero denominator")
        let g = Self.gcd(numerator, denominator)
        self.numerator = g == 0 ? 0 : numerator / g
        self.denominator = g == 0 ? 1 : denominator / g
    }

    /// Reads a plain decimal (`4`, `0.5`, `1.25`); nil for anything else.
    public init?(_ text: Substring) {
        let parts = text.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        guard let whole = parts.first, !whole.isEmpty, whole.count <= 9, whole.allSatisfy(\.isASCIIDigitCharacter) else { return nil }
        let fraction = parts.count > 1 ? parts[1] : ""
        guard parts.count == 1 || !fraction.isEmpty, fraction.count <= Self.maxDecimals,
            fraction.allSatisfy(\.isASCIIDigitCharacter)
        else { return nil }
        var scale: UInt64 = 1
        for _ in 0..<fraction.count { scale *= 10 }
        guard let w = UInt64(whole) else { return nil }
        self.init(numerator: w * scale + (fraction.isEmpty ? 0 : UInt64(fraction)!), denominator: scale)
    }

    public var hertzFactor: Double { Double(numerator) / Double(denominator) }

    public var description: String {
        denominator == 1 ? String(numerator) : "\(hertzFactor)"
    }

    /// A span of trace time on the daemon's clock: `ns` / SPEED, rounded to the nearest ns.
    public func compress(_ ns: UInt64) -> UInt64 {
        let product = ns.multipliedFullWidth(by: denominator)
        let (low, carry) = product.low.addingReportingOverflow(numerator / 2)
        let high = product.high + (carry ? 1 : 0)
        guard high < numerator else { return .max }
        return numerator.dividingFullWidth((high, low)).quotient
    }

    /// The recorded refresh as a replay shows it: × SPEED, exactly when the fraction fits.
    public func scale(_ rate: RefreshRate) -> RefreshRate {
        let (n, over1) = rate.numerator.multipliedReportingOverflow(by: numerator)
        let (d, over2) = rate.denominator.multipliedReportingOverflow(by: denominator)
        if !over1 && !over2 { return RefreshRate(numerator: n, denominator: d) }
        return RefreshRate(hertz: rate.hertz * hertzFactor)
    }

    /// The variable refresh range as a replay shows it: its rates × SPEED (whole Hz, as the
    /// EDID stores them; at most 65535).
    public func scale(_ state: VariableRefreshState) -> VariableRefreshState {
        guard let range = state.range, self != .one else { return state }
        func hz(_ value: UInt16) -> UInt16 {
            let scaled = (UInt64(value) * numerator * 2 + denominator) / (2 * denominator)
            return UInt16(min(scaled, UInt64(UInt16.max)))
        }
        return VariableRefreshState(
            capable: state.capable, enabled: state.enabled,
            range: EDIDRefreshRange(minimumHz: hz(range.minimumHz), maximumHz: hz(range.maximumHz)))
    }

    private static func gcd(_ a: UInt64, _ b: UInt64) -> UInt64 {
        var (a, b) = (a, b)
        while b != 0 { (a, b) = (b, a % b) }
        return a
    }
}

extension Character {
    fileprivate var isASCIIDigitCharacter: Bool { isASCII && isNumber }
}
