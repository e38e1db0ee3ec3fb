import Testing
@testable import VsyncCore

/// Protocol 6 (docs/PROTOCOL.md § 8): model-timed ticks of sparse vblank sampling. TICK flag bit
/// 4, subscribe flag bit 3, record flag bit 6 and the record's u32 at 236; no size changes;
/// versions 1-5 get exactly the bytes they got before, a model-timed tick saying `predicted`.
@Suite("Protocol version 6")
struct ProtocolVersion6Tests {
    static func tick(_ flags: TickFlags) -> Tick {
        Tick(
            subscriptionID: 3, displayID: 1, sequence: 600, timestampNs: 10_000_000_000, targetTimestampNs: 10_016_666_667,
            displayIntervalNs: 16_666_667, clientIntervalNs: 16_666_667, skipped: 0, divisor: 1, flags: flags,
            targetSequence: 601, timelines: FrameTimelines(one: FrameTimeline(sequence: 601, presentationNs: 10_016_666_667)),
            generation: 2)
    }

    static func u32(_ b: [UInt8], _ o: Int) -> UInt32 { (0..<4).reduce(UInt32(0)) { $0 | UInt32(b[o + $1]) << (8 * UInt32($1)) } }

    @Test("a model-timed tick: bit 4 at version 6, bit 1 (predicted) before, every other byte the same")
    func modelTimedTickFlag() throws {
        let modelTimed = Self.tick(.modelTimed)
        let predicted = Self.tick(.predicted)
        for version in UInt16(1)...WireProtocol.currentVersion {
            let bytes = ServerMessage.tick(modelTimed).encoded(version: version)
            #expect(Self.u32(bytes, 64) == (version >= 6 ? 16 : 2))
            if version < 6 { #expect(bytes == ServerMessage.tick(predicted).encoded(version: version)) }
            guard case .tick(let back)? = try ServerMessage.decode(bytes) else { Issue.record("not a tick"); continue }
            #expect(back.flags == (version >= 6 ? .modelTimed : .predicted))
        }
        #expect(ServerMessage.tick(modelTimed).encoded(version: 6).count == Tick.wireSize)
    }

    @Test("the record's phase correction at 236 and flag bit 6: version 6 only")
    func recordFields() throws {
        var d = ProtocolVersion5Tests.variableDisplay()
        d.flags.insert(.modelTimed)
        d.timing.phaseCorrectionNs = 5_300_000
        for version: UInt16 in [4, 5, 6] {
            let bytes = ServerMessage.displayList([d]).encoded(version: version)
            let record = 16
            #expect(Self.u32(bytes, record + 236) == (version >= 6 ? 5_300_000 : 0))
            #expect(Self.u32(bytes, record + 16) & 0x40 == (version >= 6 ? 0x40 : 0))
            guard case .displayList(let back)? = try ServerMessage.decode(bytes) else { Issue.record("not a list"); continue }
            #expect(back.first?.timing.phaseCorrectionNs == (version >= 6 ? 5_300_000 : 0))
        }
        #expect(ServerMessage.displayList([d]).encoded(version: 6).count == ServerMessage.displayList([d]).encoded(version: 5).count)
    }

    @Test("the hardwareTicks subscribe flag is bit 3 and round-trips")
    func hardwareTicksFlag() throws {
        #expect(SubscribeFlags.hardwareTicks.rawValue == 8)
        let request = Subscribe(subscriptionID: 4, selector: .primary, range: FrameRateRange(preferredFramesPerSecond: 60), flags: .hardwareTicks)
        let back = try ClientMessage.decode(ClientMessage.subscribe(request).encoded(), version: 6)
        #expect(back == .subscribe(request))
        #expect(WireProtocol.modelTimedTicksSinceVersion == 6 && WireProtocol.currentVersion == 6)
    }
}
