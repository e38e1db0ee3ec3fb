extension Tick {
    /// Writes the 72-byte TICK message into `buffer` without allocating and returns its size,
    /// or 0 if the buffer is too small. The daemon encodes each tick into one reused buffer.
    public func encode(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        guard buffer.count >= Tick.wireSize else { return 0 }
        func put<T: FixedWidthInteger>(_ v: T, _ offset: Int) {
            buffer.storeBytes(of: v.littleEndian, toByteOffset: offset, as: T.self)
        }
        put(MessageType.tick.rawValue, 0)
        put(UInt16(Tick.wireSize), 2)
        put(UInt32(0), 4)
        put(subscriptionID, 8)
        put(displayID, 12)
        put(sequence, 16)
        put(timestampNs, 24)
        put(targetTimestampNs, 32)
        put(displayIntervalNs, 40)
        put(clientIntervalNs, 48)
        put(skipped, 56)
        put(divisor, 60)
        put(flags.rawValue, 64)
        put(UInt32(0), 68)
        return Tick.wireSize
    }

    static func read(_ r: WireReader) throws(WireError) -> Tick {
        Tick(
            subscriptionID: try r.u32(8), displayID: try r.u32(12), sequence: try r.u64(16),
            timestampNs: try r.u64(24), targetTimestampNs: try r.u64(32),
            displayIntervalNs: try r.u64(40), clientIntervalNs: try r.u64(48),
            skipped: try r.u32(56), divisor: try r.u32(60), flags: TickFlags(rawValue: try r.u32(64)))
    }
}
