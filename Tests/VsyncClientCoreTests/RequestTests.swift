import Glibc
import Testing
import VsyncClientCore
import VsyncCore

@Suite("Client core: requests")
struct RequestTests {
    @Test func subscriptionsMadeBeforeWelcomeAreSentAfterItInIdOrderWithTheirPauseState() throws {
        let server = ScriptedServer()
        let client = try Core.client(server)
        let a = client.subscribe(.primary, range: .default)
        let b = client.subscribe(.connector("Virtual-1"), range: FrameRateRange(preferredFramesPerSecond: 20), paused: true)
        let beforeWelcome = try server.received()
        #expect(beforeWelcome.count == 1, "only HELLO before WELCOME: \(beforeWelcome)")
        let sent = try Core.welcome(client, server)
        #expect(sent == [
            .subscribe(Subscribe(subscriptionID: a, selector: .primary, range: .default)),
            .subscribe(Subscribe(subscriptionID: b, selector: .connector("Virtual-1"),
                                 range: FrameRateRange(preferredFramesPerSecond: 20), flags: [.startPaused])),
        ])
    }

    @Test func rateAndPauseChangesBecomeRequestsAndNoOpsSendNothing() throws {
        let server = ScriptedServer()
        let client = try Core.client(server)
        let id = client.subscribe(.primary, range: .default)
        try Core.welcome(client, server)
        client.setPaused(id, false)  // already running: nothing
        client.setPaused(id, true)
        client.setPaused(id, true)   // already paused: nothing
        client.setRange(id, FrameRateRange(preferredFramesPerSecond: 30))
        client.setPaused(id, false)
        client.unsubscribe(id)
        client.setPaused(id, true)   // gone: nothing
        #expect(try server.received() == [
            .pause(subscriptionID: id),
            .setRate(SetRate(subscriptionID: id, range: FrameRateRange(preferredFramesPerSecond: 30))),
            .resume(subscriptionID: id),
            .unsubscribe(subscriptionID: id),
        ])
        #expect(client.subscription(id) == nil)
    }

    /// A link set up right after it is made (rate, work duration, pause) gets its first tick
    /// already at those settings: one SUBSCRIBE carries them, sent at the next dispatch, and the
    /// fd is readable until then so a loop that polls it first does not wait forever.
    @Test func settingsMadeBeforeTheNextDispatchTravelInTheSubscribe() throws {
        let server = ScriptedServer()
        let client = try Core.client(server)
        _ = client.subscribe(.primary, range: .default)  // connects
        server.send(.welcome(Welcome(version: 2, serverFlags: [], serverPID: 42)))
        client.dispatch(timeoutMs: 1000)
        _ = try server.received()
        let id = client.subscribe(.primary, range: .default)
        let range = FrameRateRange(preferredFramesPerSecond: 30)
        client.setRange(id, range)
        client.setWorkDuration(id, 4_000_000)
        client.setPaused(id, true)
        client.setPredictWhileOff(id, true)
        #expect(try server.received() == [], "sent before the dispatch")
        var poller = pollfd(fd: client.fileDescriptor, events: Int16(POLLIN), revents: 0)
        #expect(poll(&poller, 1, 0) == 1, "the fd is not readable while a SUBSCRIBE waits")
        client.dispatch(timeoutMs: 0)
        #expect(try server.received() == [
            .subscribe(Subscribe(subscriptionID: id, selector: .primary, range: range,
                                 flags: [.startPaused, .predictWhileOff], workDurationNs: 4_000_000)),
        ])
        #expect(poll(&poller, 1, 0) == 0, "the fd stays readable after the SUBSCRIBE went")
        client.setRange(id, .default)  // sent now: the daemon has it
        #expect(try server.received() == [.setRate(SetRate(subscriptionID: id, range: .default))])

        // Made and ended before a dispatch: the daemon hears of it not at all.
        let brief = client.subscribe(.primary, range: .default)
        client.unsubscribe(brief)
        client.dispatch(timeoutMs: 0)
        #expect(try server.received() == [])
    }

    /// A full socket keeps requests in order and sends them once it drains (EPOLLOUT).
    @Test func requestsBehindAFullSocketAreKeptInOrderAndSentWhenItDrains() throws {
        let server = ScriptedServer()
        let client = try Core.client(server)
        let id = client.subscribe(.primary, range: .default)
        try Core.welcome(client, server)
        // Fill the client's direction: the server does not read meanwhile.
        var sent: [ClientMessage] = []
        for i in 0..<2000 {
            let range = FrameRateRange(preferredFramesPerSecond: 1 + i % 60)
            client.setRange(id, range)
            sent.append(.setRate(SetRate(subscriptionID: id, range: range)))
        }
        var received: [ClientMessage] = []
        let deadline = Core.now() + 5_000_000_000
        while received.count < sent.count && Core.now() < deadline {
            received += try server.received()
            client.dispatch(timeoutMs: 10)
        }
        #expect(received.count == sent.count, "\(received.count) of \(sent.count) requests arrived")
        #expect(received == sent, "requests reordered or changed")
    }

    @Test func ticksForPausedOrUnknownSubscriptionsAreDropped() throws {
        let server = ScriptedServer()
        let client = try Core.client(server)
        let a = client.subscribe(.primary, range: .default)
        let b = client.subscribe(.primary, range: .default)
        try Core.welcome(client, server)
        _ = Core.events(client)
        client.setPaused(b, true)
        server.send(Core.tick(a, 10))
        server.send(Core.tick(b, 10))   // in flight when paused
        server.send(Core.tick(99, 10))  // never subscribed
        client.dispatch(timeoutMs: 1000)
        let frames = Core.frames(Core.events(client))
        #expect(frames.map(\.subscriptionID) == [a])
    }
}
