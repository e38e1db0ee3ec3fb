import TestSupport
import Testing
@testable import VsyncCore

@Suite("Protocol codec")
struct ProtocolCodecTests {
    static let clientMessages: [ClientMessage] = [
        .hello(Hello(minVersion: 1, maxVersion: 3, clientName: "app-ümlaut")),
        .listDisplays,
        .subscribe(Subscribe(subscriptionID: 9, selector: .primary, range: rateRange(0, 0, 0), flags: [])),
        .subscribe(Subscribe(subscriptionID: 10, selector: .crtc(36), range: rateRange(10, 60, 24), flags: .predictWhileOff)),
        .subscribe(Subscribe(subscriptionID: 11, selector: .connector("HDMI-A-1"), range: rateRange(30, 144, 72), flags: [.startPaused, .predictWhileOff])),
        .subscribe(Subscribe(subscriptionID: 12, selector: .display(3), range: rateRange(1, 1, 1))),
        .setRate(SetRate(subscriptionID: 9, range: rateRange(15, 30, 20))),
        .pause(subscriptionID: 1), .resume(subscriptionID: 2), .unsubscribe(subscriptionID: UInt32.max),
        .subscribe(Subscribe(subscriptionID: 13, selector: .primary, range: rateRange(0, 0, 0), workDurationNs: 4_000_000)),
        .setWorkDuration(SetWorkDuration(subscriptionID: 13, workDurationNs: WorkDuration.maximumNs)),
    ]

    static let serverMessages: [ServerMessage] = [
        .welcome(Welcome(version: 1, serverFlags: [], serverPID: 4242)),
        .refused(Refusal(code: .versionUnsupported, message: "client speaks 5–6, server 1–1")),
        .refused(Refusal(code: .tooManyClients, message: "")),
        .displayList([]),
        .displayList([sampleDisplay(id: 1), sampleDisplay(id: 2, name: "timer")]),
        .subscribed(Subscribed(subscriptionID: 3, displayID: 7, divisor: 2, displayIntervalNs: 16_683_350, clientIntervalNs: 33_366_700, display: sampleDisplay())),
        .tick(sampleTick()),
        .tick(Tick(
            subscriptionID: 5, displayID: 1, sequence: 1001, timestampNs: 5_000, targetTimestampNs: 60_000,
            displayIntervalNs: 16_666_667, clientIntervalNs: 33_333_334, skipped: 0, divisor: 2, flags: .predicted,
            targetSequence: 1004, timelines: FrameTimelines((0..<4).map { FrameTimeline(sequence: 1004 + 2 * UInt64($0), presentationNs: 60_000 + 33_333_334 * UInt64($0)) }))),
        .displayEvent(DisplayEvent(kind: .modeChanged, display: sampleDisplay())),
        .displayEvent(DisplayEvent(kind: .removed, display: DisplayInfo(displayID: 1, crtcID: 0, connectorID: 0, state: .off, flags: [], refreshMillihertz: 0, periodNs: 0, width: 0, height: 0, connectorName: "", deviceName: ""))),
        .error(ErrorMessage(code: .unknownSubscription, subscriptionID: 77, message: "no subscription 77")),
        .timingPage(TimingPageMessage(pageSize: 4096, layout: 1)),
    ]

    @Test(arguments: clientMessages)
    func clientRoundTrip(_ message: ClientMessage) throws {
        let bytes = message.encoded()
        #expect(bytes.count == message.type.knownSize)
        #expect(Int(bytes[2]) | Int(bytes[3]) << 8 == bytes.count)
        #expect(try ClientMessage.decode(bytes) == message)
    }

    @Test(arguments: serverMessages)
    func serverRoundTrip(_ message: ServerMessage) throws {
        let bytes = message.encoded()
        #expect(bytes.count >= message.type.knownSize)
        #expect(bytes.count <= WireProtocol.maxMessageSize)
        #expect(try ServerMessage.decode(bytes) == message)
    }

    /// Protocol 1's shorter SUBSCRIBE and TICK are still read, with the fields appended in 2 at
    /// their defaults; a work duration over the maximum is malformed.
    @Test func version1MessagesAndWorkDurationBounds() throws {
        var subscribe = ClientMessage.subscribe(Subscribe(subscriptionID: 4, selector: .primary, range: rateRange(0, 0, 30))).encoded()
        #expect(subscribe.count == 80)
        subscribe = Array(subscribe.prefix(68))
        subscribe[2] = 68
        #expect(try ClientMessage.decode(subscribe) == .subscribe(Subscribe(subscriptionID: 4, selector: .primary, range: rateRange(0, 0, 30))))

        var buffer = [UInt8](repeating: 0xAA, count: Tick.wireSize)
        let tick = sampleTick()
        let n = buffer.withUnsafeMutableBytes { tick.encode(into: $0, version: 1) }
        #expect(n == Tick.version1WireSize)
        guard case .tick(let old)? = try ServerMessage.decode(Array(buffer.prefix(n))) else { Issue.record("not a tick"); return }
        #expect(old.targetSequence == tick.sequence + UInt64(tick.divisor))
        #expect(old.timelines.count == 1 && old.timelines.first == FrameTimeline(sequence: old.targetSequence, presentationNs: tick.targetTimestampNs))

        let tooLong = ClientMessage.setWorkDuration(SetWorkDuration(subscriptionID: 1, workDurationNs: WorkDuration.maximumNs + 1)).encoded()
        #expect(throws: WireError.self) { try ClientMessage.decode(tooLong) }
        var badCount = ServerMessage.tick(tick).encoded()
        badCount[80] = 5
        #expect(throws: WireError.self) { try ServerMessage.decode(badCount) }
        badCount[80] = 0
        #expect(throws: WireError.self) { try ServerMessage.decode(badCount) }
    }

    @Test func everyTypeIsCovered() {
        let covered = Set(Self.clientMessages.map(\.type) + Self.serverMessages.map(\.type))
        #expect(covered == Set(MessageType.allCases))
    }

    // MARK: truncation and framing

    @Test(arguments: clientMessages)
    func truncatedClientMessagesAreRejected(_ message: ClientMessage) {
        let bytes = message.encoded()
        for cut in 0..<bytes.count {
            var short = Array(bytes[0..<cut])
            // Keep the size field honest so the shortness itself is what is rejected.
            if cut >= 4 { short[2] = UInt8(cut & 0xFF); short[3] = UInt8(cut >> 8) }
            // Protocol 1's shorter form is still read; anything else cut short is not.
            if cut == message.type.minimumSize { continue }
            #expect(throws: WireError.self) { try ClientMessage.decode(short) }
        }
    }

    @Test func truncatedReportsMinimum() {
        var bytes = ClientMessage.subscribe(Subscribe(subscriptionID: 1, selector: .primary, range: rateRange(0, 0, 0))).encoded()
        bytes.removeLast(16)
        bytes[2] = UInt8(bytes.count)
        #expect(throws: WireError.truncated(type: 3, size: 64, minimum: 68)) { try ClientMessage.decode(bytes) }
        #expect(throws: WireError.truncated(type: 0, size: 0, minimum: 8)) { try ClientMessage.decode([]) }
    }

    @Test func oversizedIsRejected() {
        var bytes = [UInt8](repeating: 0, count: WireProtocol.maxMessageSize + 1)
        bytes[0] = 2
        #expect(throws: WireError.oversized(4097)) { try ClientMessage.decode(bytes) }
        #expect(throws: WireError.oversized(4097)) { try ServerMessage.decode(bytes) }
    }

    @Test func sizeFieldThatLiesIsRejected() {
        var bytes = ClientMessage.pause(subscriptionID: 5).encoded()
        bytes[2] = 16  // claims 16, datagram has 12
        #expect(throws: WireError.sizeMismatch(header: 16, actual: 12)) { try ClientMessage.decode(bytes) }
        bytes[2] = 8   // claims less than it has
        #expect(throws: WireError.sizeMismatch(header: 8, actual: 12)) { try ClientMessage.decode(bytes) }
    }

    @Test func unknownTypes() throws {
        let unknownClient = hexBytes("42 00 08 00 00 00 00 00")
        #expect(throws: WireError.unknownType(0x42)) { try ClientMessage.decode(unknownClient) }
        // A server type sent by a client is not a request.
        let tick = ServerMessage.tick(sampleTick()).encoded()
        #expect(throws: WireError.unknownType(0x105)) { try ClientMessage.decode(tick) }
        // A newer server's message type is ignored by the client, not an error.
        let future = hexBytes("99 01 0c 00 00 00 00 00 de ad be ef")
        #expect(try ServerMessage.decode(future) == nil)
        // A client request type arriving at the client is an error.
        #expect(throws: WireError.unknownType(0x03)) { try ServerMessage.decode(hexBytes("03 00 08 00 00 00 00 00")) }
    }

    // MARK: fields

    @Test func badUTF8InNamesIsRejected() {
        var hello = ClientMessage.hello(Hello(minVersion: 1, maxVersion: 1, clientName: "ab")).encoded()
        hello[16] = 0xFF
        #expect(throws: WireError.self) { try ClientMessage.decode(hello) }

        var sub = ClientMessage.subscribe(Subscribe(subscriptionID: 1, selector: .connector("DP-1"), range: rateRange(0, 0, 0))).encoded()
        sub[25] = 0xC3  // a lead byte followed by "-": not UTF-8
        #expect(throws: WireError.self) { try ClientMessage.decode(sub) }

        var list = ServerMessage.displayList([sampleDisplay()]).encoded()
        list[16 + 48] = 0x80  // a lone continuation byte at the start of the connector name
        #expect(throws: WireError.self) { try ServerMessage.decode(list) }
    }

    @Test func badMagicIsRejected() {
        var hello = ClientMessage.hello(Hello(minVersion: 1, maxVersion: 1, clientName: "x")).encoded()
        hello[8] = 0x57
        #expect(throws: WireError.self) { try ClientMessage.decode(hello) }
    }

    @Test func badEnumsAndRatesAreRejected() {
        var sub = ClientMessage.subscribe(Subscribe(subscriptionID: 1, selector: .primary, range: rateRange(0, 0, 0))).encoded()
        sub[16] = 9  // selector kind
        #expect(throws: WireError.self) { try ClientMessage.decode(sub) }

        for bad: Float in [.nan, .infinity, -1] {
            let rate = ClientMessage.setRate(SetRate(subscriptionID: 1, range: rateRange(0, 60, 30))).encoded()
            var b = rate
            withUnsafeBytes(of: bad.bitPattern.littleEndian) { for i in 0..<4 { b[20 + i] = $0[i] } }
            #expect(throws: WireError.self) { try ClientMessage.decode(b) }
        }

        // minimum above maximum: FrameRateRange refuses it, so the codec does too.
        var swapped = ClientMessage.setRate(SetRate(subscriptionID: 1, range: rateRange(30, 60, 0))).encoded()
        withUnsafeBytes(of: Float(90).bitPattern.littleEndian) { for i in 0..<4 { swapped[12 + i] = $0[i] } }
        #expect(throws: WireError.self) { try ClientMessage.decode(swapped) }

        var event = ServerMessage.displayEvent(DisplayEvent(kind: .on, display: sampleDisplay())).encoded()
        event[8] = 0x63
        #expect(throws: WireError.self) { try ServerMessage.decode(event) }
        var state = ServerMessage.displayEvent(DisplayEvent(kind: .on, display: sampleDisplay())).encoded()
        state[16 + 12] = 2
        #expect(throws: WireError.self) { try ServerMessage.decode(state) }
    }

    @Test func longNamesAreCutAtACharacterBoundary() throws {
        // 31 ASCII bytes then a 2-byte character: the character does not fit and is dropped whole.
        let name = String(repeating: "a", count: 31) + "é"
        let bytes = ClientMessage.hello(Hello(minVersion: 1, maxVersion: 1, clientName: name)).encoded()
        guard case .hello(let h) = try ClientMessage.decode(bytes) else { Issue.record("not a hello"); return }
        #expect(h.clientName == String(repeating: "a", count: 31))
        // Exactly 32 bytes needs no terminator.
        let full = String(repeating: "z", count: 32)
        guard case .hello(let h2) = try ClientMessage.decode(ClientMessage.hello(Hello(minVersion: 1, maxVersion: 1, clientName: full)).encoded()) else {
            Issue.record("a HELLO did not decode as a HELLO"); return
        }
        #expect(h2.clientName == full)
    }

    @Test func errorTextIsCappedAndRepaired() throws {
        let long = String(repeating: "x", count: 1000)
        let bytes = ServerMessage.error(ErrorMessage(code: .internalError, message: long)).encoded()
        #expect(bytes.count == 16 + WireProtocol.maxTextSize)
        var bad = ServerMessage.refused(Refusal(code: .badHandshake, message: "ok")).encoded()
        bad.append(0xFF); bad[2] = UInt8(bad.count)
        guard case .refused(let r) = try ServerMessage.decode(bad) else { Issue.record("not refused"); return }
        #expect(r.message.hasPrefix("ok"))
        #expect(r.message != "ok")
    }

    // MARK: extension rule

    @Test(arguments: clientMessages)
    func longerClientMessagesAreAccepted(_ message: ClientMessage) throws {
        var bytes = message.encoded()
        bytes += [1, 2, 3, 4, 5, 6, 7, 8]
        bytes[2] = UInt8(bytes.count & 0xFF); bytes[3] = UInt8(bytes.count >> 8)
        #expect(try ClientMessage.decode(bytes) == message)
    }

    @Test func longerServerMessagesAreAccepted() throws {
        for message in [ServerMessage.tick(sampleTick()), .welcome(Welcome(version: 1, serverFlags: [], serverPID: 1)),
                        .subscribed(Subscribed(subscriptionID: 1, displayID: 1, divisor: 1, displayIntervalNs: 1, clientIntervalNs: 1, display: sampleDisplay())),
                        .displayEvent(DisplayEvent(kind: .added, display: sampleDisplay()))] {
            var bytes = message.encoded()
            bytes += [UInt8](repeating: 0xEE, count: 24)
            bytes[2] = UInt8(bytes.count & 0xFF); bytes[3] = UInt8(bytes.count >> 8)
            #expect(try ServerMessage.decode(bytes) == message)
        }
    }

    @Test func displayListWithLongerRecords() throws {
        // A newer server appends 8 bytes to each record and says so in record_size.
        let displays = [sampleDisplay(id: 1), sampleDisplay(id: 2)]
        let plain = ServerMessage.displayList(displays).encoded(version: 2)
        var bytes = Array(plain[0..<16])
        bytes[12] = 104
        for i in 0..<2 {
            bytes += plain[(16 + i * 96)..<(16 + (i + 1) * 96)]
            bytes += [UInt8](repeating: 0xEE, count: 8)
        }
        bytes[2] = UInt8(bytes.count & 0xFF); bytes[3] = UInt8(bytes.count >> 8)
        #expect(try ServerMessage.decode(bytes) == .displayList(displays))
    }

    @Test func displayListCountThatLiesIsRejected() {
        var bytes = ServerMessage.displayList([sampleDisplay()]).encoded()
        bytes[8] = 0xFF; bytes[9] = 0xFF; bytes[10] = 0xFF; bytes[11] = 0x7F  // 2^31 records claimed
        #expect(throws: WireError.self) { try ServerMessage.decode(bytes) }
        var small = ServerMessage.displayList([sampleDisplay()]).encoded()
        small[12] = 8; small[13] = 0  // record size below 96
        #expect(throws: WireError.self) { try ServerMessage.decode(small) }
    }

    /// Found by the client-side fuzzer: count × record size overflowed Int and trapped.
    @Test func displayListWithHugeCountAndRecordSizeThrows() {
        let bytes: [UInt8] = [0x03, 0x01, 0x10, 0x00, 0, 0, 0, 0] + [UInt8](repeating: 0xFF, count: 8)
        #expect(throws: WireError.self) { try ServerMessage.decode(bytes) }
    }

    @Test(arguments: [(UInt16(2), 42), (UInt16(3), 18), (UInt16(4), 17)])
    func displayListIsCappedToOneDatagram(version: UInt16, cap: Int) throws {
        let many = (0..<100).map { sampleDisplay(id: UInt32($0)) }
        let bytes = ServerMessage.displayList(many).encoded(version: version)
        #expect(bytes.count <= WireProtocol.maxMessageSize)
        guard case .displayList(let got) = try ServerMessage.decode(bytes) else { Issue.record("not a list"); return }
        #expect(got.count == ServerMessage.maxDisplaysPerList(version: version) && got.count == cap)
        #expect(got == Array(many.prefix(got.count)))
    }

    /// The client's tick path decodes a TICK itself (`decodeTick`): on mutated ticks, every
    /// version's, it gives what `decode` gives, error for error; it passes over (nil) only a
    /// well-framed datagram of another type.
    @Test func theTickPathDecodesAsDecodeDoes() {
        var rng = SplitMix64(seed: 0x71C4)
        let ticks = [UInt16(1), 2, 4, 5].map { ServerMessage.tick(sampleTick()).encoded(version: $0) }
        let others = Self.serverMessages.map { $0.encoded() }.filter { UInt16($0[0]) | UInt16($0[1]) << 8 != MessageType.tick.rawValue }
        var compared = 0, decodedTicks = 0, failures = 0
        for i in 0..<20_000 {
            var bytes = i % 4 == 3 ? others[Int(rng.next() % UInt64(others.count))] : ticks[Int(rng.next() % UInt64(ticks.count))]
            if i % 8 != 0 {
                for _ in 0..<(1 + rng.next() % 3) {
                    bytes[Int(rng.next() % UInt64(bytes.count))] = UInt8(truncatingIfNeeded: rng.next())
                }
            }
            if i % 16 == 5 { bytes.removeLast(Int(rng.next() % UInt64(bytes.count))) }
            let general = bytes.withUnsafeBytes { b in Result { () throws(WireError) in try ServerMessage.decode(b) } }
            let fast = bytes.withUnsafeBytes { b in Result { () throws(WireError) in try ServerMessage.decodeTick(b) } }
            switch (general, fast) {
            case (.success(.tick(let a)?), .success(let b?)): #expect(a == b); decodedTicks += 1
            case (_, .success(nil)):
                // Another type, framed well: `decode` judges its body (the client calls it next).
                let type = UInt16(bytes[0]) | UInt16(bytes[1]) << 8
                #expect(type != MessageType.tick.rawValue, "decodeTick passed over a TICK: \(bytes)")
            case (.failure(let a), .failure(let b)): #expect(a == b); failures += 1
            default: Issue.record("decode \(general) but decodeTick \(fast) for \(bytes)")
            }
            compared += 1
        }
        // Both kinds of outcome were met, so the agreement covered both.
        #expect(compared == 20_000 && decodedTicks > 1_000 && failures > 1_000, "\(decodedTicks) ticks, \(failures) failures")
    }

    /// A cheap deterministic fuzz: random and mutated datagrams never trap.
    @Test func randomInputNeverTraps() {
        var rng = SplitMix64(seed: 0x5EED)
        let seeds = Self.clientMessages.map { $0.encoded() } + Self.serverMessages.map { $0.encoded() }
        var decoded = 0
        for i in 0..<20_000 {
            var bytes: [UInt8]
            if i % 2 == 0 {
                bytes = seeds[Int(rng.next() % UInt64(seeds.count))]
                for _ in 0..<(1 + rng.next() % 4) where !bytes.isEmpty {
                    bytes[Int(rng.next() % UInt64(bytes.count))] = UInt8(truncatingIfNeeded: rng.next())
                }
            } else {
                bytes = (0..<Int(rng.next() % 200)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
                if bytes.count >= 4 { bytes[2] = UInt8(bytes.count); bytes[3] = 0; bytes[1] = UInt8(rng.next() % 2) }
            }
            if (try? ClientMessage.decode(bytes)) != nil { decoded += 1 }
            if (try? ServerMessage.decode(bytes)) != nil { decoded += 1 }
        }
        // Mutations that leave a message valid exist; the point is we got here without a trap.
        #expect(decoded > 0)
    }
}
