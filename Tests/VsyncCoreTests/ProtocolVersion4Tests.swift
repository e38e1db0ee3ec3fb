import Testing
@testable import VsyncCore

/// Protocol 4 (docs/PROTOCOL.md § 8): the generation in TICK's and the record's reserved u32s,
/// flag bit 3 and the residuals appended to the record; older versions get the old bytes.
@Suite("Protocol version 4")
struct ProtocolVersion4Tests {
    static func richDisplay() -> DisplayInfo {
        var d = sampleDisplay()
        d.flags.insert(.interruptTimestamps)
        d.generation = 0xA1B2_C3D4
        d.timing = DisplayTiming(rmsNs: 412_345, p99Ns: 2_000_001, samples: 120)
        d.busPath = "platform-vkms"
        return d
    }

    /// The same display as a version 3 peer knows it: no generation, no timing, no bit 3.
    static func asVersion3(_ d: DisplayInfo) -> DisplayInfo {
        var old = d
        old.flags.remove(.interruptTimestamps)
        old.generation = 0
        old.timing = DisplayTiming()
        return old
    }

    static func u32(_ b: [UInt8], _ o: Int) -> UInt32 {
        UInt32(b[o]) | UInt32(b[o + 1]) << 8 | UInt32(b[o + 2]) << 16 | UInt32(b[o + 3]) << 24
    }

    @Test func recordBytesAtVersion4() throws {
        let d = Self.richDisplay()
        let bytes = ServerMessage.displayEvent(DisplayEvent(kind: .modeChanged, display: d)).encoded(version: 4)
        #expect(bytes.count == 16 + DisplayInfo.version4WireSize && bytes.count == 256)
        #expect(Self.u32(bytes, 16 + 16) == DisplayFlags([.hardwareClock, .primary, .interruptTimestamps]).rawValue)
        #expect(Self.u32(bytes, 16 + 16) & 8 == 8)
        #expect(Self.u32(bytes, 16 + 20) == 0xA1B2_C3D4)
        #expect(Self.u32(bytes, 16 + 224) == 412_345)
        #expect(Self.u32(bytes, 16 + 228) == 2_000_001)
        #expect(Self.u32(bytes, 16 + 232) == 120)
        #expect(Self.u32(bytes, 16 + 236) == 0)
        #expect(try ServerMessage.decode(bytes) == .displayEvent(DisplayEvent(kind: .modeChanged, display: d)))
    }

    /// A version 1–3 connection gets exactly the bytes it got before version 4 existed.
    @Test(arguments: [UInt16(1), 2, 3])
    func olderVersionsGetTheOldBytes(version: UInt16) throws {
        let rich = Self.richDisplay(), old = Self.asVersion3(rich)
        let messages: [(ServerMessage, ServerMessage)] = [
            (.displayList([rich, rich]), .displayList([old, old])),
            (.subscribed(Subscribed(subscriptionID: 1, displayID: 7, divisor: 1, displayIntervalNs: 1, clientIntervalNs: 1, display: rich)),
             .subscribed(Subscribed(subscriptionID: 1, displayID: 7, divisor: 1, displayIntervalNs: 1, clientIntervalNs: 1, display: old))),
            (.displayEvent(DisplayEvent(kind: .on, display: rich)), .displayEvent(DisplayEvent(kind: .on, display: old))),
        ]
        for (new, plain) in messages {
            let bytes = new.encoded(version: version)
            #expect(bytes == plain.encoded(version: version))
        }
        let record = ServerMessage.displayList([rich]).encoded(version: version)
        #expect(Int(Self.u32(record, 12)) == (version >= 3 ? 224 : 96))
        #expect(Self.u32(record, 16 + 20) == 0 && Self.u32(record, 16 + 16) & 8 == 0)
        // Read back by a version 4 reader: generation 0, nothing measured.
        guard case .displayList(let got) = try ServerMessage.decode(record) else { Issue.record("not a list"); return }
        var expected = old
        if version < 3 { expected.busPath = "" }
        #expect(got == [expected])
    }

    @Test(arguments: [UInt16(1), 2, 3, 4])
    func tickCarriesTheGenerationFromVersion4(version: UInt16) throws {
        var tick = sampleTick()
        tick.generation = 0xDEAD_BEEF
        var buffer = [UInt8](repeating: 0xEE, count: Tick.wireSize)
        let n = buffer.withUnsafeMutableBytes { tick.encode(into: $0, version: version) }
        #expect(n == (version >= 2 ? 152 : 72))
        #expect(Self.u32(buffer, 68) == (version >= 4 ? 0xDEAD_BEEF : 0))
        var old = tick
        old.generation = 0
        var plain = [UInt8](repeating: 0xEE, count: Tick.wireSize)
        _ = plain.withUnsafeMutableBytes { old.encode(into: $0, version: version) }
        if version < 4 { #expect(buffer == plain) }
        let decoded = try ServerMessage.decode(Array(buffer.prefix(n)))
        guard case .tick(let got) = decoded else { Issue.record("not a tick"); return }
        #expect(got.generation == (version >= 4 ? 0xDEAD_BEEF : 0))
        #expect(ServerMessage.tick(tick).encoded(version: version) == Array(buffer.prefix(n)))
    }

    @Test func roundTripsAtVersion4() throws {
        let d = Self.richDisplay()
        var tick = sampleTick()
        tick.generation = 5
        for m in [ServerMessage.displayList([d, sampleDisplay(id: 2)]), .tick(tick),
                  .subscribed(Subscribed(subscriptionID: 3, displayID: 7, divisor: 2, displayIntervalNs: 2, clientIntervalNs: 4, display: d))] {
            #expect(try ServerMessage.decode(m.encoded(version: 4)) == m)
        }
        #expect(ServerMessage.maxDisplaysPerList(version: 4) == 17)
    }

    /// The record the daemon fills from its model: exact stamps measure 0 and no flag; stamps
    /// late by an interrupt's latency are flagged, with their spread.
    @Test func displayTimingFromTheModel() {
        let period = 1e9 / 60
        var exact = RefreshModel(nominalPeriodNs: period)
        #expect(exact.displayTiming.timing == DisplayTiming() && exact.displayTiming.flags.isEmpty)
        for s in farSequenceBase..<(farSequenceBase + 120) {
            exact.add(sequence: s, timestampNs: vblankTime(s, periodNs: period, noiseNs: 0))
        }
        let e = exact.displayTiming
        #expect(e.flags.isEmpty && e.timing.samples == 120 && e.timing.rmsNs <= 1 && e.timing.p99Ns <= 1)

        var late = RefreshModel(nominalPeriodNs: period)
        for (s, t) in InterruptTimestampTests.stream(frames: 240, periodNs: period, seed: 23) {
            late.add(sequence: s, timestampNs: t)
        }
        let l = late.displayTiming
        #expect(l.flags == .interruptTimestamps, "\(late.quality)")
        #expect(l.timing.samples == 120)
        #expect(l.timing.rmsNs >= 100_000 && l.timing.p99Ns >= l.timing.rmsNs, "\(l.timing)")
        let q = late.quality
        #expect(Double(l.timing.rmsNs) == q.rmsNs.rounded() && Double(l.timing.p99Ns) == q.p99Ns.rounded())
    }
}

/// What a display's generation counts of the model's own restarts: a new period, not a new
/// phase after a gap (an idle spell changes nothing a client was told).
@Suite("Refresh model restarts counted for generations")
struct PeriodRestartTests {
    @Test func aNewPeriodCountsAGapDoesNot() {
        let p60 = 1e9 / 60, p75 = 1e9 / 75
        var model = RefreshModel(nominalPeriodNs: p60)
        var t = farTimestampBase
        var s = farSequenceBase
        for _ in 0..<30 { model.add(sequence: s, timestampNs: t); s += 1; t += UInt64(p60.rounded()) }
        // Idle for 3 s: the phase starts over, the period stays.
        t += 3_005_000_000; s += 180  // 5 ms off the old phase
        for _ in 0..<10 { model.add(sequence: s, timestampNs: t); s += 1; t += UInt64(p60.rounded()) }
        #expect(model.restartCount == 1 && model.periodRestartCount == 0)
        // 75 Hz without a reset: a run of agreeing outliers restarts on the new period.
        for _ in 0..<12 { model.add(sequence: s, timestampNs: t); s += 1; t += UInt64(p75.rounded()) }
        #expect(model.restartCount == 2 && model.periodRestartCount == 1)
        #expect(abs(model.periodNs - p75) < 1_000)
    }
}
