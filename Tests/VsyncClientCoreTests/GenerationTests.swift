import Testing
import VsyncClientCore
import VsyncCore

/// Protocol 4's configuration generation as the client core hands it out: on every frame and in
/// the subscription's display record, so an app compares one number.
@Suite("Client core: configuration generations")
struct GenerationTests {
    static func tick(_ id: UInt32, _ sequence: UInt64, generation: UInt32) -> ServerMessage {
        guard case .tick(var t) = Core.tick(id, sequence) else { fatalError("Core.tick makes ticks") }
        t.generation = generation
        return .tick(t)
    }

    @Test func framesAndRecordsCarryTheGeneration() throws {
        let server = ScriptedServer()
        let client = try Core.client(server)
        let id = client.subscribe(.primary, range: .default)
        let sent = try Core.welcome(client, server)
        guard case .hello(let hello)? = sent.first else { Issue.record("no HELLO first: \(sent)"); return }
        #expect(hello.maxVersion == WireProtocol.currentVersion && WireProtocol.currentVersion >= 4)
        _ = Core.events(client)

        var display = Core.display
        display.generation = 3
        display.timing = DisplayTiming(rmsNs: 1_500, p99Ns: 4_000, samples: 120)
        server.send(Core.subscribed(id, display: display))
        server.send(Self.tick(id, 10, generation: 3))
        client.dispatch(timeoutMs: 1000)
        #expect(Core.frames(Core.events(client)).map(\.generation) == [3])
        #expect(client.subscription(id)?.display?.generation == 3)
        #expect(client.subscription(id)?.display?.timing == display.timing)

        // A mode change: the event's record has the new generation, and so do later frames.
        display.generation = 4
        display.refreshMillihertz = 144_000
        server.send(.displayEvent(DisplayEvent(kind: .modeChanged, display: display)))
        server.send(Self.tick(id, 11, generation: 4))
        client.dispatch(timeoutMs: 1000)
        let events = Core.events(client)
        let changed = events.compactMap { if case .display(_, let e) = $0 { e } else { nil } }
        #expect(changed.map(\.display.generation) == [4])
        #expect(Core.frames(events).map(\.generation) == [4])
        #expect(client.subscription(id)?.display?.generation == 4)

        // Ticks coalesced in one read: the frame is the newest, with its generation.
        server.send(Self.tick(id, 12, generation: 4))
        server.send(Self.tick(id, 13, generation: 5))
        client.dispatch(timeoutMs: 1000)
        let last = Core.frames(Core.events(client))
        #expect(last.map(\.generation) == [5] && last.map(\.sequence) == [13])
    }
}
