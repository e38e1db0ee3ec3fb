import Testing
@testable import VsyncCore

/// Golden bytes written by hand from docs/PROTOCOL.md, so a layout change breaks a test.
@Suite("Protocol golden bytes")
struct ProtocolGoldenBytesTests {
    @Test func helloBytes() throws {
        let golden = hexBytes("""
            01 00 30 00 00 00 00 00
            56 53 59 4e 01 00 02 00
            70 72 6f 62 65 00 00 00 00 00 00 00 00 00 00 00
            00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
            """)
        let message = ClientMessage.hello(Hello(minVersion: 1, maxVersion: 2, clientName: "probe"))
        #expect(message.encoded() == golden)
        #expect(try ClientMessage.decode(golden) == message)
    }

    @Test func subscribeBytes() throws {
        let version1 = """
            03 00 44 00 00 00 00 00
            01 00 00 00 01 00 00 00
            02 00 00 00 00 00 00 00
            56 69 72 74 75 61 6c 2d 31 00 00 00 00 00 00 00
            00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
            00 00 f0 41 00 00 70 42 00 00 f0 41
            """
        // Protocol 2 appends a reserved u32 and the work duration, 4 ms.
        var golden = hexBytes(version1 + " 00 00 00 00 00 09 3d 00 00 00 00 00")
        golden[2] = 0x50
        let message = ClientMessage.subscribe(Subscribe(
            subscriptionID: 1, selector: .connector("Virtual-1"),
            range: rateRange(30, 60, 30), flags: .startPaused, workDurationNs: 4_000_000))
        #expect(message.encoded() == golden)
        #expect(try ClientMessage.decode(golden) == message)
        var old = message
        if case .subscribe(var m) = old { m.workDurationNs = 0; old = .subscribe(m) }
        #expect(try ClientMessage.decode(hexBytes(version1)) == old)
    }

    @Test func setWorkDurationBytes() throws {
        let golden = hexBytes("08 00 18 00 00 00 00 00 07 00 00 00 00 00 00 00 00 2d 31 01 00 00 00 00")
        let message = ClientMessage.setWorkDuration(SetWorkDuration(subscriptionID: 7, workDurationNs: 20_000_000))
        #expect(message.encoded() == golden)
        #expect(try ClientMessage.decode(golden) == message)
    }

    @Test func tickBytes() throws {
        let version1 = """
            05 01 48 00 00 00 00 00
            01 00 00 00 02 00 00 00
            10 00 00 00 00 00 00 00
            00 ca 9a 3b 00 00 00 00
            55 6a 97 3d 00 00 00 00
            2b 50 fe 00 00 00 00 00
            55 a0 fc 01 00 00 00 00
            03 00 00 00 02 00 00 00
            04 00 00 00 00 00 00 00
            """
        // Protocol 2: target sequence 0x12, one timeline (0x12, the target time), three empty.
        var golden = hexBytes(version1 + """
             12 00 00 00 00 00 00 00
            01 00 00 00 00 00 00 00
            12 00 00 00 00 00 00 00 55 6a 97 3d 00 00 00 00
            """ + String(repeating: " 00", count: 48))
        golden[2] = 0x98
        let tick = sampleTick()
        #expect(ServerMessage.tick(tick).encoded() == golden)
        #expect(try ServerMessage.decode(golden) == .tick(tick))

        // The allocation-free path writes the same bytes and reports the size, in either version.
        var buffer = [UInt8](repeating: 0xAA, count: 200)
        let n = buffer.withUnsafeMutableBytes { tick.encode(into: $0) }
        #expect(n == 152)
        #expect(Array(buffer[0..<n]) == golden)
        #expect(buffer[n] == 0xAA)
        buffer = [UInt8](repeating: 0xAA, count: 200)
        let n1 = buffer.withUnsafeMutableBytes { tick.encode(into: $0, version: 1) }
        #expect(n1 == 72)
        #expect(Array(buffer[0..<n1]) == hexBytes(version1))
        #expect(buffer[n1] == 0xAA)
        #expect(try ServerMessage.decode(hexBytes(version1)) == .tick(tick))
    }

    @Test func tickEncodeRefusesSmallBuffer() {
        var buffer = [UInt8](repeating: 0, count: 151)
        #expect(buffer.withUnsafeMutableBytes { sampleTick().encode(into: $0) } == 0)
        #expect(buffer.withUnsafeMutableBytes { sampleTick().encode(into: $0, version: 1) } == 72)
    }

    @Test func welcomeAndErrorBytes() throws {
        let welcome = hexBytes("01 01 14 00 00 00 00 00 01 00 00 00 01 00 00 00 39 30 00 00")
        let w = ServerMessage.welcome(Welcome(version: 1, serverFlags: .syntheticSource, serverPID: 12345))
        #expect(w.encoded() == welcome)
        let error = hexBytes("07 01 12 00 00 00 00 00 01 00 00 00 00 00 00 00 68 69")
        let e = ServerMessage.error(ErrorMessage(code: .malformed, subscriptionID: 0, message: "hi"))
        #expect(e.encoded() == error)
        #expect(try ServerMessage.decode(error) == e)
    }

    /// TIMING_PAGE (protocol 5) as § 5's table lays it out: page size 4096, layout 1.
    @Test func timingPageBytes() throws {
        let bytes = hexBytes("08 01 10 00 00 00 00 00 00 10 00 00 01 00 00 00")
        let m = ServerMessage.timingPage(TimingPageMessage(pageSize: 4096, layout: 1))
        #expect(m.encoded() == bytes)
        #expect(try ServerMessage.decode(bytes) == m)
    }

    /// The daemon encodes a tick once per divisor group and version and patches it per
    /// subscriber: the patched bytes are exactly the tick encoded for that subscriber.
    @Test(arguments: [1, 2, 3, 4, 5] as [UInt16])
    func aPatchedTickIsTheTickEncodedForItsSubscriber(version: UInt16) {
        var first = sampleTick()
        first.flags.insert(.variable)
        first.generation = 9
        var other = first
        other.subscriptionID = 0xA1B2_C3D4
        other.skipped = 77
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Tick.wireSize, alignment: 8)
        defer { buffer.deallocate() }
        let n = first.encode(into: buffer, version: version)
        Tick.patch(buffer, subscriptionID: other.subscriptionID, skipped: other.skipped)
        let patched = Array(buffer.prefix(n))
        let direct = [UInt8](unsafeUninitializedCapacity: Tick.wireSize) { out, count in
            count = other.encode(into: UnsafeMutableRawBufferPointer(out), version: version)
        }
        #expect(patched == direct)
        #expect(n == (version >= 2 ? 152 : 72))
    }
}
