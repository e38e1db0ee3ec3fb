/// Bounds-checked little-endian reads over one received datagram.
///
/// Every read checks its range and throws instead of trapping: the daemon decodes
/// untrusted input, and the codec is fuzzed.
struct WireReader {
    let bytes: UnsafeRawBufferPointer
    let type: UInt16

    init(_ bytes: UnsafeRawBufferPointer, type: UInt16) {
        self.bytes = bytes
        self.type = type
    }

    var count: Int { bytes.count }

    // Inlined, so that a message's constant offsets fold its checks into a few compares
    // (a TICK's twenty reads were a tenth of libvsync's instructions per tick as calls).
    @inline(__always)
    private func check(_ offset: Int, _ length: Int) throws(WireError) {
        guard offset >= 0, length >= 0, offset <= bytes.count, length <= bytes.count - offset else {
            throw .truncated(type: type, size: bytes.count, minimum: offset + length)
        }
    }

    func u8(_ offset: Int) throws(WireError) -> UInt8 {
        try check(offset, 1)
        return bytes[offset]
    }

    func u16(_ offset: Int) throws(WireError) -> UInt16 {
        try check(offset, 2)
        return UInt16(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt16.self))
    }

    @inline(__always)
    func u32(_ offset: Int) throws(WireError) -> UInt32 {
        try check(offset, 4)
        return UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt32.self))
    }

    @inline(__always)
    func u64(_ offset: Int) throws(WireError) -> UInt64 {
        try check(offset, 8)
        return UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
    }

    func f32(_ offset: Int) throws(WireError) -> Float {
        Float(bitPattern: try u32(offset))
    }

    /// A fixed-width NUL-padded UTF-8 field: the bytes before the first NUL. Invalid UTF-8 is
    /// rejected rather than repaired, because names are used to look displays up.
    func name(_ offset: Int, width: Int, field: String) throws(WireError) -> String {
        try check(offset, width)
        let raw = UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + width)])
        let end = raw.firstIndex(of: 0) ?? width
        guard let s = String(validating: raw[0..<end], as: UTF8.self) else {
            throw .invalidField("\(field) is not valid UTF-8")
        }
        return s
    }

    /// Free text from `offset` to the end of the datagram, trailing NULs dropped. Invalid
    /// UTF-8 is repaired: the text is only ever shown to people.
    func text(from offset: Int) throws(WireError) -> String {
        try check(offset, 0)
        var end = bytes.count
        while end > offset, bytes[end - 1] == 0 { end -= 1 }
        return String(decoding: UnsafeRawBufferPointer(rebasing: bytes[offset..<end]), as: UTF8.self)
    }
}
