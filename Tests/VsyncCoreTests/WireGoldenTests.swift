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
        let golden = hexBytes("""
            03 00 44 00 00 00 00 00
            01 00 00 00 01 00 00 00
            02 00 00 00 00 00 00 00
            56 69 72 74 75 61 6c 2d 31 00 00 00 00 00 00 00
            00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
            00 00 f0 41 00 00 70 42 00 00 f0 41
            """)
        let message = ClientMessage.subscribe(Subscribe(
            subscriptionID: 1, selector: .connector("Virtual-1"),
            range: rateRange(30, 60, 30), flags: .startPaused))
        #expect(message.encoded() == golden)
        #expect(try ClientMessage.decode(golden) == message)
    }

    @Test func tickBytes() throws {
        let golden = hexBytes("""
            05 01 48 00 00 00 00 00
            01 00 00 00 02 00 00 00
            10 00 00 00 00 00 00 00
            00 ca 9a 3b 00 00 00 00
            55 6a 97 3d 00 00 00 00
            2b 50 fe 00 00 00 00 00
            55 a0 fc 01 00 00 00 00
            03 00 00 00 02 00 00 00
            04 00 00 00 00 00 00 00
            """)
        let tick = sampleTick()
        #expect(ServerMessage.tick(tick).encoded() == golden)
        #expect(try ServerMessage.decode(golden) == .tick(tick))

        // The allocation-free path writes the same bytes and reports the size.
        var buffer = [UInt8](repeating: 0xAA, count: 128)
        let n = buffer.withUnsafeMutableBytes { tick.encode(into: $0) }
        #expect(n == 72)
        #expect(Array(buffer[0..<n]) == golden)
        #expect(buffer[n] == 0xAA)
    }

    @Test func tickEncodeRefusesSmallBuffer() {
        var buffer = [UInt8](repeating: 0, count: 71)
        #expect(buffer.withUnsafeMutableBytes { sampleTick().encode(into: $0) } == 0)
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
}
