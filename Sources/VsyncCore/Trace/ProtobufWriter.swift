/// A minimal protocol buffers encoder (the wire format of protobuf.dev's encoding guide):
/// varints, fixed 32/64-bit values, length-delimited fields and nested messages, appended to one
/// byte array. It writes only; no schema, no reflection, no Foundation, so the daemon's module
/// can carry it and a trace costs no more than the bytes it holds.
public struct ProtobufWriter: Sendable {
    /// The wire types a field's tag names.
    public enum WireType: UInt8, Sendable {
        case varint = 0
        case fixed64 = 1
        case lengthDelimited = 2
        case fixed32 = 5
    }

    public private(set) var bytes: [UInt8]

    public init(capacity: Int = 0) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    /// Hands the bytes over and starts empty, keeping the storage's capacity for the next ones.
    public mutating func take() -> [UInt8] {
        let out = bytes
        bytes.removeAll(keepingCapacity: true)
        return out
    }

    // MARK: Raw encodings

    /// Base-128, least significant group first, high bit set on all but the last byte.
    public mutating func varint(_ value: UInt64) {
        var v = value
        while v >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        bytes.append(UInt8(v))
    }

    /// How many bytes `varint(value)` writes.
    public static func varintSize(_ value: UInt64) -> Int {
        var n = 1
        var v = value >> 7
        while v != 0 {
            n += 1
            v >>= 7
        }
        return n
    }

    public mutating func tag(_ field: UInt32, _ type: WireType) {
        varint(UInt64(field) << 3 | UInt64(type.rawValue))
    }

    // MARK: Fields

    public mutating func uint64(_ field: UInt32, _ value: UInt64) {
        tag(field, .varint)
        varint(value)
    }

    public mutating func uint32(_ field: UInt32, _ value: UInt32) { uint64(field, UInt64(value)) }

    /// `int64`: two's complement, so a negative value takes ten bytes (as protobuf specifies).
    public mutating func int64(_ field: UInt32, _ value: Int64) { uint64(field, UInt64(bitPattern: value)) }

    /// `int32` and enums: sign-extended to 64 bits first, as every protobuf encoder does, so
    /// that a decoder reading the field as int64 gets the same negative number.
    public mutating func int32(_ field: UInt32, _ value: Int32) { int64(field, Int64(value)) }

    public mutating func bool(_ field: UInt32, _ value: Bool) { uint64(field, value ? 1 : 0) }

    public mutating func fixed64(_ field: UInt32, _ value: UInt64) {
        tag(field, .fixed64)
        for shift in stride(from: 0, to: 64, by: 8) { bytes.append(UInt8(truncatingIfNeeded: value >> UInt64(shift))) }
    }

    public mutating func fixed32(_ field: UInt32, _ value: UInt32) {
        tag(field, .fixed32)
        for shift in stride(from: 0, to: 32, by: 8) { bytes.append(UInt8(truncatingIfNeeded: value >> UInt32(shift))) }
    }

    public mutating func double(_ field: UInt32, _ value: Double) { fixed64(field, value.bitPattern) }

    public mutating func float(_ field: UInt32, _ value: Float) { fixed32(field, value.bitPattern) }

    public mutating func string(_ field: UInt32, _ value: String) {
        var s = value
        s.withUTF8 { utf8 in
            tag(field, .lengthDelimited)
            varint(UInt64(utf8.count))
            bytes.append(contentsOf: utf8)
        }
    }

    public mutating func bytes(_ field: UInt32, _ value: [UInt8]) {
        tag(field, .lengthDelimited)
        varint(UInt64(value.count))
        bytes.append(contentsOf: value)
    }

    /// A nested message (or a packed field): `body` writes its fields into this writer, then its
    /// length is put in front of them. The length is not known before the body is written, and
    /// a copy through a second buffer would cost an allocation per message; moving the body up
    /// by the one or two bytes of a small length does not.
    public mutating func message(_ field: UInt32, _ body: (inout ProtobufWriter) -> Void) {
        tag(field, .lengthDelimited)
        let start = bytes.count
        body(&self)
        var length = UInt64(bytes.count - start)
        let size = Self.varintSize(length)
        bytes.insert(contentsOf: repeatElement(0, count: size), at: start)
        for i in start..<start + size {
            bytes[i] = UInt8(truncatingIfNeeded: length) | (i < start + size - 1 ? 0x80 : 0)
            length >>= 7
        }
    }
}
