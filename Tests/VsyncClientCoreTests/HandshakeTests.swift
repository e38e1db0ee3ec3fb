import Testing
import VsyncClientCore
import VsyncCore

@Suite("Client core: handshake and subscriptions")
struct HandshakeTests {
    static let display = DisplayInfo(
        displayID: 1, crtcID: 0, connectorID: 0, state: .on, flags: [.synthetic, .primary],
        refreshMillihertz: 60_000, periodNs: 16_666_667, width: 0, height: 0,
        connectorName: "timer", deviceName: "timer")

    func makeClient(_ server: ScriptedServer) throws -> VsyncClient {
        var config = VsyncClient.Configuration(socketPath: "/scripted", clientName: "core-test")
        config.connector = server.connector()
        return try VsyncClient(config)
    }

    @Test func subscribeConnectsSendsHelloThenSubscribeAfterWelcome() throws {
        let server = ScriptedServer()
        let client = try makeClient(server)
        let id = client.subscribe(.primary, range: FrameRateRange(preferredFramesPerSecond: 30))
        let hello = try server.received()
        guard case .hello(let h)? = hello.first, hello.count == 1 else {
            Issue.record("expected one HELLO, got \(hello)")
            return
        }
        #expect(h.clientName == "core-test")
        server.send(.welcome(Welcome(version: 1, serverFlags: [.syntheticSource], serverPID: 42)))
        client.dispatch(timeoutMs: 1000)
        #expect(client.nextEvent() == .connected(Welcome(version: 1, serverFlags: [.syntheticSource], serverPID: 42)))
        let sent = try server.received()
        #expect(sent == [.subscribe(Subscribe(subscriptionID: id, selector: .primary,
                                              range: FrameRateRange(preferredFramesPerSecond: 30)))])
    }

    @Test func ticksReadTogetherCoalesceToTheNewestWithSkippedCounts() throws {
        let server = ScriptedServer()
        let client = try makeClient(server)
        let id = client.subscribe(.primary, range: .default)
        server.send(.welcome(Welcome(version: 1, serverFlags: [], serverPID: 42)))
        client.dispatch(timeoutMs: 1000)
        _ = try server.received()
        while client.nextEvent() != nil {}
        for (seq, skipped) in [(10, 0), (11, 2), (14, 1)] as [(UInt64, UInt32)] {
            server.send(.tick(Tick(subscriptionID: id, displayID: 1, sequence: seq, timestampNs: seq * 1000,
                                   targetTimestampNs: seq * 1000 + 1000, displayIntervalNs: 1000,
                                   clientIntervalNs: 1000, skipped: skipped, divisor: 1, flags: [.synthetic])))
        }
        let frames = client.dispatch(timeoutMs: 1000)
        #expect(frames == 1)
        guard case .frame(let frame)? = client.nextEvent() else {
            Issue.record("expected a frame")
            return
        }
        // Newest is 14 (own skipped 1); it replaced 10 (+0+1) and 11 (+2+1): 1 + 1 + 3 = 5.
        #expect(frame.sequence == 14)
        #expect(frame.skipped == 5)
        #expect(client.nextEvent() == nil)
    }
}
