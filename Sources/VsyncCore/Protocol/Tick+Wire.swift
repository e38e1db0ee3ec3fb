extension Tick {
    /// Writes the TICK message into `buffer` without allocating and returns its size (152 bytes,
    /// or protocol 1's 72 when `version` is 1), or 0 if the buffer is too small. The daemon
    /// encodes each tick into one reused buffer.
    public func encode(into buffer: UnsafeMutableRawBufferPointer, version: UInt16 = WireProtocol.currentVersion) -> Int {
        let size = version >= 2 ? Tick.wireSize : Tick.version1WireSize
        guard buffer.count >= size else { return 0 }
        func put<T: FixedWidthInteger>(_ v: T, _ offset: Int) {
            buffer.storeBytes(of: v.littleEndian, toByteOffset: offset, as: T.self)
        }
        put(MessageType.tick.rawValue, 0)
        put(UInt16(size), 2)
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
        put(Self.wireFlags(flags, version: version).rawValue, 64)
        put(version >= 4 ? generation : 0, 68)  // reserved before protocol 4
        guard size == Tick.wireSize else { return size }
        put(targetSequence, 72)
        put(UInt32(timelines.count), 80)
        put(UInt32(0), 84)
        for i in 0..<FrameTimelines.capacity {
            let t = i < timelines.count ? timelines[i] : FrameTimeline(sequence: 0, presentationNs: 0)
            put(t.sequence, 88 + 16 * i)
            put(t.presentationNs, 96 + 16 * i)
        }
        return size
    }

    /// Rewrites the two fields that differ between the subscribers of one tick (whose it is, and
    /// its skipped count) in a TICK already encoded in `buffer`: the daemon encodes a tick once
    /// per divisor and protocol version and patches it for each subscriber. Both fields sit in
    /// the first 72 bytes, so every version's TICK has them where `encode` put them.
    public static func patch(_ buffer: UnsafeMutableRawBufferPointer, subscriptionID: UInt32, skipped: UInt32) {
        buffer.storeBytes(of: subscriptionID.littleEndian, toByteOffset: 8, as: UInt32.self)
        buffer.storeBytes(of: skipped.littleEndian, toByteOffset: 56, as: UInt32.self)
    }

    static func read(_ r: WireReader) throws(WireError) -> Tick {
        var tick = Tick(
            subscriptionID: try r.u32(8), displayID: try r.u32(12), sequence: try r.u64(16),
            timestampNs: try r.u64(24), targetTimestampNs: try r.u64(32),
            displayIntervalNs: try r.u64(40), clientIntervalNs: try r.u64(48),
            skipped: try r.u32(56), divisor: try r.u32(60), flags: TickFlags(rawValue: try r.u32(64)),
            generation: try r.u32(68))  // older daemons wrote 0 in the reserved field
        guard r.count > Tick.version1WireSize else { return tick }  // protocol 1: defaults derived above
        tick.targetSequence = try r.u64(72)
        _ = try r.u64(Tick.wireSize - 8)  // all or nothing: a tick cut inside the timelines is malformed
        let count = try r.u32(80)
        guard count >= 1, count <= UInt32(FrameTimelines.capacity) else {
            throw .invalidField("timeline count \(count) is not 1…\(FrameTimelines.capacity)")
        }
        var timelines = FrameTimelines()
        for i in 0..<Int(count) {
            timelines.append(FrameTimeline(sequence: try r.u64(88 + 16 * i), presentationNs: try r.u64(96 + 16 * i)))
        }
        tick.timelines = timelines
        return tick
    }
}

extension Tick {
    /// The flags as `version` knows them: bit 3 from protocol 5; bit 4 from protocol 6, a
    /// model-timed tick being `.predicted` (its timestamp is the model's) before.
    static func wireFlags(_ flags: TickFlags, version: UInt16) -> TickFlags {
        var out = flags
        if version < WireProtocol.variableRefreshSinceVersion { out.remove(.variable) }
        if version < WireProtocol.modelTimedTicksSinceVersion, out.contains(.modelTimed) {
            out.remove(.modelTimed)
            out.insert(.predicted)
        }
        return out
    }
}
