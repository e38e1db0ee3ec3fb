/// The 8-byte header every message starts with: u16 type, u16 size, u32 reserved.
struct MessageHeader {
    let type: UInt16
    let size: Int

    /// Checks the datagram's framing: long enough for a header, not oversized, and the size
    /// field equal to the datagram's length (a size field that lies is malformed).
    static func parse(_ bytes: UnsafeRawBufferPointer) throws(WireError) -> MessageHeader {
        guard bytes.count <= WireProtocol.maxMessageSize else { throw .oversized(bytes.count) }
        guard bytes.count >= WireProtocol.headerSize else {
            let type: UInt16 = bytes.count >= 2 ? UInt16(bytes[0]) | UInt16(bytes[1]) << 8 : 0
            throw .truncated(type: type, size: bytes.count, minimum: WireProtocol.headerSize)
        }
        let r = WireReader(bytes, type: 0)
        let type = try r.u16(0)
        let size = Int(try r.u16(2))
        guard size == bytes.count else { throw .sizeMismatch(header: size, actual: bytes.count) }
        return MessageHeader(type: type, size: size)
    }

    /// Rejects a message shorter than the least any version wrote for its type.
    static func requireMinimumSize(_ type: MessageType, _ bytes: UnsafeRawBufferPointer) throws(WireError) {
        guard bytes.count >= type.minimumSize else {
            throw .truncated(type: type.rawValue, size: bytes.count, minimum: type.minimumSize)
        }
    }
}

extension FrameRateRange {
    /// Three f32s: minimum, maximum, preferred. A range FrameRateRange refuses (NaN, negative,
    /// minimum above maximum, …) is a malformed field, so rate mapping never sees it.
    static func read(_ r: WireReader, at offset: Int) throws(WireError) -> FrameRateRange {
        let minimum = try r.f32(offset)
        let maximum = try r.f32(offset + 4)
        let preferred = try r.f32(offset + 8)
        do {
            return try FrameRateRange(minimum: minimum, maximum: maximum, preferred: preferred)
        } catch {
            throw .invalidField(error.description)
        }
    }

    func write(_ w: inout WireWriter) {
        w.f32(minimum)
        w.f32(maximum)
        w.f32(preferred)
    }
}

extension DisplayInfo {
    /// Reads a record of `size` bytes (at least 96): protocol 3's and 4's fields when it has
    /// them (older daemons wrote 0 in the reserved u32 that is now the generation).
    static func read(_ r: WireReader, at o: Int, size: Int) throws(WireError) -> DisplayInfo {
        let stateRaw = try r.u8(o + 12)
        guard let state = DisplayState(rawValue: stateRaw) else {
            throw .invalidField("display state \(stateRaw)")
        }
        return DisplayInfo(
            displayID: try r.u32(o), crtcID: try r.u32(o + 4), connectorID: try r.u32(o + 8),
            state: state, flags: DisplayFlags(rawValue: try r.u32(o + 16)),
            refreshMillihertz: try r.u64(o + 24), periodNs: try r.u64(o + 32),
            width: try r.u16(o + 40), height: try r.u16(o + 42),
            connectorName: try r.name(o + 48, width: WireProtocol.nameSize, field: "connector name"),
            deviceName: try r.name(o + 80, width: WireProtocol.deviceNameSize, field: "device name"),
            busPath: size >= version3WireSize ? try r.name(o + 96, width: 64, field: "bus path") : "",
            edidMake: size >= version3WireSize ? try r.name(o + 160, width: 32, field: "EDID make") : "",
            edidModel: size >= version3WireSize ? try r.name(o + 192, width: 16, field: "EDID model") : "",
            edidSerial: size >= version3WireSize ? try r.name(o + 208, width: 16, field: "EDID serial") : "",
            generation: try r.u32(o + 20),
            timing: size >= version4WireSize
                ? DisplayTiming(
                    rmsNs: try r.u32(o + 224), p99Ns: try r.u32(o + 228), samples: try r.u32(o + 232),
                    phaseCorrectionNs: try r.u32(o + 236))
                : DisplayTiming(),
            minIntervalNs: size >= version5WireSize ? try r.u64(o + 240) : 0,
            maxIntervalNs: size >= version5WireSize ? try r.u64(o + 248) : 0,
            clock: size >= version5WireSize ? try readClock(r, at: o + 256) : nil
        )
    }

    /// A pair of zeros is "not sampled".
    private static func readClock(_ r: WireReader, at o: Int) throws(WireError) -> ClockPair? {
        let pair = ClockPair(monotonicNs: try r.u64(o), realtimeNs: try r.u64(o + 8))
        return pair.monotonicNs == 0 && pair.realtimeNs == 0 ? nil : pair
    }

    func write(_ w: inout WireWriter, version: UInt16) {
        w.u32(displayID)
        w.u32(crtcID)
        w.u32(connectorID)
        w.u8(state.rawValue)
        w.zeros(3)
        // A flag bit and a reserved field gain meaning only with the version that defines them.
        w.u32(flags.subtracting(.definedAfter(version: version)).rawValue)
        w.u32(version >= 4 ? generation : 0)
        w.u64(refreshMillihertz)
        w.u64(periodNs)
        w.u16(width)
        w.u16(height)
        w.zeros(4)
        w.name(connectorName, width: WireProtocol.nameSize)
        w.name(deviceName, width: WireProtocol.deviceNameSize)
        guard version >= 3 else { return }
        w.name(busPath, width: 64)
        w.name(edidMake, width: 32)
        w.name(edidModel, width: 16)
        w.name(edidSerial, width: 16)
        guard version >= 4 else { return }
        w.u32(timing.rmsNs)
        w.u32(timing.p99Ns)
        w.u32(timing.samples)
        w.u32(version >= WireProtocol.modelTimedTicksSinceVersion ? timing.phaseCorrectionNs : 0)  // reserved before 6
        guard version >= 5 else { return }
        w.u64(minIntervalNs)
        w.u64(maxIntervalNs)
        w.u64(clock?.monotonicNs ?? 0)
        w.u64(clock?.realtimeNs ?? 0)
    }
}
