// Apart from FrameRateRange.swift so that libvsync's Embedded Swift build, which has no
// Codable, can compile the rest of the type from the same file.
extension FrameRateRange: Codable {
    private enum CodingKeys: String, CodingKey { case minimum, maximum, preferred }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let min = try c.decode(Float.self, forKey: .minimum)
        let max = try c.decode(Float.self, forKey: .maximum)
        let pref = try c.decode(Float.self, forKey: .preferred)
        if let problem = Self.problem(minimum: min, maximum: max, preferred: pref) {
            throw DecodingError.dataCorruptedError(forKey: .preferred, in: c, debugDescription: problem)
        }
        self.init(unchecked: min, max, pref)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(minimum, forKey: .minimum)
        try c.encode(maximum, forKey: .maximum)
        try c.encode(preferred, forKey: .preferred)
    }
}
