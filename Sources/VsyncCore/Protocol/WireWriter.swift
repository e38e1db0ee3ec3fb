/// Little-endian writes for encoding. Messages are built whole and then sent as one datagram.
struct WireWriter {
    private(set) var bytes: [UInt8]

    /// Starts a message with its header; `finish()` patches the size in.
    init(type: MessageType, capacity: Int) {
        bytes = []
        bytes.reserveCapacity(capacity)
        u16(type.rawValue)
        u16(0)
        u32(0)
    }

    mutating func u8(_ v: UInt8) { bytes.append(v) }
    mutating func u16(_ v: UInt16) { withUnsafeBytes(of: v.littleEndian) { bytes.append(contentsOf: $0) } }
    mutating func u32(_ v: UInt32) { withUnsafeBytes(of: v.littleEndian) { bytes.append(contentsOf: $0) } }
    mutating func u64(_ v: UInt64) { withUnsafeBytes(of: v.littleEndian) { bytes.append(contentsOf: $0) } }
    mutating func f32(_ v: Float) { u32(v.bitPattern) }
    mutating func zeros(_ n: Int) { bytes.append(contentsOf: repeatElement(0, count: n)) }

    /// A fixed-width NUL-padded field; a longer string is cut at a character boundary.
    mutating func name(_ s: String, width: Int) {
        let utf8 = WireWriter.prefix(s, maxBytes: width)
        bytes.append(contentsOf: utf8)
        zeros(width - utf8.count)
    }

    /// Trailing free text, cut to `WireProtocol.maxTextSize` bytes at a character boundary.
    mutating func text(_ s: String) {
        bytes.append(contentsOf: WireWriter.prefix(s, maxBytes: WireProtocol.maxTextSize))
    }

    func finish() -> [UInt8] {
        var out = bytes
        let size = UInt16(clamping: out.count)
        out[2] = UInt8(truncatingIfNeeded: size)
        out[3] = UInt8(truncatingIfNeeded: size >> 8)
        return out
    }

    /// The longest prefix of `s` that fits in `maxBytes` of UTF-8 without splitting a
    /// character, and stops at an embedded NUL (which would end the field for the reader).
    static func prefix(_ s: String, maxBytes: Int) -> [UInt8] {
        var out: [UInt8] = []
        for ch in s.unicodeScalars {
            if ch.value == 0 { break }
            let n = UTF8.width(ch)
            if out.count + n > maxBytes { break }
            out.append(contentsOf: UTF8.encode(ch)!)
        }
        return out
    }
}
