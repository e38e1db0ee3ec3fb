/// The frame rates a client accepts, like `CAFrameRateRange`: rates in frames per second.
///
/// `maximum == 0` means no upper bound (the display's maximum); `preferred == 0` means "the
/// highest rate the range allows". `FrameRateRange.default` (all zero) asks for the display's
/// maximum. How a range becomes a rate: see `RateMapping`.
public struct FrameRateRange: Sendable, Hashable, CustomStringConvertible {
    public let minimum: Float
    public let maximum: Float
    public let preferred: Float

    /// The display's maximum rate.
    public static let `default` = FrameRateRange(unchecked: 0, 0, 0)

    /// Why a range was refused.
    public struct Invalid: Error, Sendable, Hashable, CustomStringConvertible {
        public let description: String
    }

    /// A validated range: every value finite and ≥ 0, `minimum ≤ maximum` unless maximum is 0,
    /// and a non-zero `preferred` inside [minimum, maximum] (maximum 0: no upper bound).
    public init(minimum: Float, maximum: Float, preferred: Float = 0) throws(Invalid) {
        if let problem = Self.problem(minimum: minimum, maximum: maximum, preferred: preferred) {
            throw Invalid(description: problem)
        }
        self.init(unchecked: minimum, maximum, preferred)
    }

    /// Only a preferred rate, no bounds: what `preferredFramesPerSecond` means.
    /// Negative or non-finite values mean 0 (the display's maximum).
    public init(preferredFramesPerSecond fps: Int) {
        self.init(unchecked: 0, 0, fps > 0 ? Float(fps) : 0)
    }

    init(unchecked minimum: Float, _ maximum: Float, _ preferred: Float) {
        self.minimum = minimum
        self.maximum = maximum
        self.preferred = preferred
    }

    /// Nil if valid, else one line saying what is wrong.
    public static func problem(minimum: Float, maximum: Float, preferred: Float) -> String? {
        for (name, v) in [("minimum", minimum), ("maximum", maximum), ("preferred", preferred)]
        where !v.isFinite || v < 0 {
            return "frame rate range \(name) is \(v): rates must be finite and at least 0"
        }
        if maximum > 0, minimum > maximum {
            return "frame rate range minimum \(minimum) is above maximum \(maximum): swap them"
        }
        if preferred > 0, preferred < minimum || (maximum > 0 && preferred > maximum) {
            return "frame rate range preferred \(preferred) is outside [\(minimum), \(maximum)]: use 0 for 'highest in range'"
        }
        return nil
    }

    public var description: String { "\(minimum)…\(maximum == 0 ? "max" : "\(maximum)") pref \(preferred)" }
}
