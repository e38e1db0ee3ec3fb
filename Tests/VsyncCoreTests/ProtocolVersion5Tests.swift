import Testing
@testable import VsyncCore

/// Protocol 5 (docs/PROTOCOL.md § 8): variable refresh in TICK flag bit 3, record flag bits 4-5,
/// the record's min/max interval and clock pair appended at 240 (272-byte records), DISPLAY_EVENT
/// kind 6; versions 1-4 get exactly the bytes they got before.
@Suite("Protocol version 5")
struct ProtocolVersion5Tests {
    static let clock = ClockPair(monotonicNs: 0x0102_0304_0506_0708, realtimeNs: 0x1122_3344_5566_7788)

    static func variableDisplay() -> DisplayInfo {
        var d = ProtocolVersion4Tests.richDisplay()
        d.flags.formUnion([.variable, .variableCapable])
        d.minIntervalNs = 6_944_444
        d.maxIntervalNs = 20_833_333
        d.clock = clock
        return d
    }

    /// The same display as a version 4 peer knows it.
    static func asVersion4(_ d: DisplayInfo) -> DisplayInfo {
        var old = d
        old.flags.subtract([.variable, .variableCapable])
        old.minIntervalNs = 0; old.maxIntervalNs = 0; old.clock = nil
        return old
    }

    static func u64(_ b: [UInt8], _ o: Int) -> UInt64 {
        (0..<8).reduce(UInt64(0)) { $0 | UInt64(b[o + $1]) << (8 * UInt64($1)) }
    }

    @Test func recordBytesAtVersion5() throws {
        let d = Self.variableDisplay()
        let bytes = ServerMessage.displayEvent(DisplayEvent(kind: .variableRefreshChanged, display: d)).encoded(version: 5)
        #expect(bytes.count == 16 + 272 && bytes.count == 288)
        #expect(bytes[8] == 6 && bytes[9] == 0)
        #expect(ProtocolVersion4Tests.u32(bytes, 16 + 16) == 0x01 | 0x04 | 0x08 | 0x10 | 0x20)
        #expect(ProtocolVersion4Tests.u32(bytes, 16 + 224) == 412_345)  // version 4's fields stay put
        #expect(Self.u64(bytes, 16 + 240) == 6_944_444)
        #expect(Self.u64(bytes, 16 + 248) == 20_833_333)
        #expect(Self.u64(bytes, 16 + 256) == Self.clock.monotonicNs)
        #expect(Self.u64(bytes, 16 + 264) == Self.clock.realtimeNs)
        #expect(try ServerMessage.decode(bytes) == .displayEvent(DisplayEvent(kind: .variableRefreshChanged, display: d)))
        let list = ServerMessage.displayList([d]).encoded(version: 5)
        #expect(ProtocolVersion4Tests.u32(list, 12) == 272 && list.count == 16 + 272)
        let subscribed = ServerMessage.subscribed(Subscribed(subscriptionID: 1, displayID: 7, divisor: 1, displayIntervalNs: 1,
                                                             clientIntervalNs: 1, display: d)).encoded(version: 5)
        #expect(subscribed.count == 312)
        #expect(ServerMessage.maxDisplaysPerList(version: 5) == 15)
    }

    /// A version 1-4 connection gets exactly the bytes it got before version 5 existed.
    @Test(arguments: [UInt16(1), 2, 3, 4])
    func olderVersionsGetTheOldBytes(version: UInt16) throws {
        let rich = Self.variableDisplay(), old = Self.asVersion4(rich)
        for (new, plain) in [
            (ServerMessage.displayList([rich, rich]), ServerMessage.displayList([old, old])),
            (.displayEvent(DisplayEvent(kind: .modeChanged, display: rich)), .displayEvent(DisplayEvent(kind: .modeChanged, display: old))),
            (.subscribed(Subscribed(subscriptionID: 1, displayID: 7, divisor: 1, displayIntervalNs: 1, clientIntervalNs: 1, display: rich)),
             .subscribed(Subscribed(subscriptionID: 1, displayID: 7, divisor: 1, displayIntervalNs: 1, clientIntervalNs: 1, display: old))),
        ] {
            #expect(new.encoded(version: version) == plain.encoded(version: version))
        }
        let record = ServerMessage.displayList([rich]).encoded(version: version)
        #expect(Int(ProtocolVersion4Tests.u32(record, 12)) == DisplayInfo.wireSize(version: version))
        #expect(ProtocolVersion4Tests.u32(record, 16 + 16) & 0x30 == 0)
        guard case .displayList(let got) = try ServerMessage.decode(record) else { Issue.record("not a list"); return }
        #expect(got[0].minIntervalNs == 0 && got[0].maxIntervalNs == 0 && got[0].clock == nil)
        #expect(!got[0].flags.contains(.variable) && !got[0].flags.contains(.variableCapable))
    }

    @Test(arguments: [UInt16(1), 2, 3, 4, 5])
    func tickFlagsVariableFromVersion5(version: UInt16) throws {
        var tick = sampleTick()
        tick.flags = [.hardwareTimestamp, .variable]
        var buffer = [UInt8](repeating: 0, count: Tick.wireSize)
        let n = buffer.withUnsafeMutableBytes { tick.encode(into: $0, version: version) }
        #expect(n == (version >= 2 ? 152 : 72), "TICK keeps its size")
        #expect(ProtocolVersion4Tests.u32(buffer, 64) == (version >= 5 ? 9 : 1))
        var plain = tick
        plain.flags = .hardwareTimestamp
        if version < 5 { #expect(ServerMessage.tick(tick).encoded(version: version) == ServerMessage.tick(plain).encoded(version: version)) }
        guard case .tick(let got) = try ServerMessage.decode(Array(buffer.prefix(n))) else { Issue.record("not a tick"); return }
        #expect(got.flags.contains(.variable) == (version >= 5))
    }

    @Test func theNewEventKindIsForVersion5Only() {
        #expect(DisplayEventKind.variableRefreshChanged.rawValue == 6)
        #expect(DisplayEventKind.variableRefreshChanged.minimumVersion == 5)
        #expect(DisplayEventKind.allCases.filter { $0 != .variableRefreshChanged }.allSatisfy { $0.minimumVersion == 1 })
        #expect(DisplayFlags.definedAfter(version: 4) == [.variable, .variableCapable, .modelTimed])
        #expect(DisplayFlags.definedAfter(version: 3) == [.interruptTimestamps, .variable, .variableCapable, .modelTimed])
        #expect(DisplayFlags.definedAfter(version: 5) == .modelTimed)
    }

    /// The client fuzzer's find: a record decoded with a bit no version defines (bit 31) and
    /// written again at the same version must keep it, so the round trip is the identity; only
    /// the bits a later version defines are cleared for an older connection.
    @Test func bitsNoVersionDefinesPassThroughAndLaterOnesAreCleared() throws {
        var display = DisplayInfo(displayID: 1, crtcID: 0, connectorID: 0, state: .on,
                                  flags: DisplayFlags(rawValue: 0x8000_0006).union(.variable), refreshMillihertz: 60_000,
                                  periodNs: 16_666_667, width: 0, height: 0, connectorName: "timer", deviceName: "timer")
        display.generation = 0
        let event = ServerMessage.displayEvent(DisplayEvent(kind: .on, display: display))
        guard case .displayEvent(let back)? = try ServerMessage.decode(event.encoded(version: 5)) else {
            Issue.record("no display event"); return
        }
        #expect(back.display.flags.rawValue == 0x8000_0016)
        guard case .displayEvent(let old)? = try ServerMessage.decode(event.encoded(version: 4)) else {
            Issue.record("no display event"); return
        }
        #expect(old.display.flags.rawValue == 0x8000_0006, "bit 4 (variable, version 5) cleared for version 4")
    }

    /// A zero pair is "not sampled" (DISPLAY_LIST and SUBSCRIBED records carry none).
    @Test func aRecordWithoutAClockReadsNil() throws {
        var d = Self.variableDisplay()
        d.clock = nil
        let bytes = ServerMessage.displayList([d]).encoded(version: 5)
        #expect(Self.u64(bytes, 16 + 256) == 0 && Self.u64(bytes, 16 + 264) == 0)
        #expect(try ServerMessage.decode(bytes) == .displayList([d]))
    }
}
