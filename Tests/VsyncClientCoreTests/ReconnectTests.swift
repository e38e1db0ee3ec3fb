import Glibc
import Testing
import VsyncClientCore
import VsyncCore

@Suite("Client core: reconnect, idle, the fd")
struct ReconnectTests {
    @Test func aDaemonRestartIsReportedOnceAndEverySubscriptionIsRenewedAsItIsNow() throws {
        let server = ScriptedServer()
        let client = try Core.client(server) { $0.initialBackoffNs = 10_000_000 }
        let a = client.subscribe(.primary, range: .default)
        let b = client.subscribe(.primary, range: .default)
        try Core.welcome(client, server)
        let fd = client.fileDescriptor
        client.setRange(a, FrameRateRange(preferredFramesPerSecond: 30))
        client.setPaused(b, true)
        _ = try server.received()
        _ = Core.events(client)
        server.hangUp()
        let events = Core.run(client, forMs: 100)
        let errors = Core.errors(events)
        #expect(errors.map(\.0) == [a, b])
        #expect(errors.allSatisfy { $0.1 == .connectionLost(socketPath: "/scripted") })
        // It connected again by itself (a new socketpair): HELLO, then after WELCOME the renewals.
        let hello = try server.received()
        guard case .hello? = hello.first else {
            Issue.record("no new HELLO after the hang-up: \(hello)")
            return
        }
        let renewed = try Core.welcome(client, server)
        #expect(renewed == [
            .subscribe(Subscribe(subscriptionID: a, selector: .primary, range: FrameRateRange(preferredFramesPerSecond: 30))),
            .subscribe(Subscribe(subscriptionID: b, selector: .primary, range: .default, flags: [.startPaused])),
        ])
        #expect(client.fileDescriptor == fd, "the app's fd stays the same across reconnects")
    }

    /// The fd is readable exactly when there is work: a tick waiting, a retry due; never in the
    /// steady state with nothing waiting (an uncleared timerfd would make every loop spin).
    @Test func theFdIsReadableExactlyWhenThereIsWork() throws {
        let server = ScriptedServer()
        let client = try Core.client(server)
        let id = client.subscribe(.primary, range: .default)
        server.send(.welcome(Welcome(version: 1, serverFlags: [], serverPID: 42)))
        #expect(Core.readable(client.fileDescriptor, waitingMs: 1000), "WELCOME waiting")
        client.dispatch(timeoutMs: 0)
        _ = Core.events(client)
        #expect(!Core.readable(client.fileDescriptor, waitingMs: 50), "steady state, nothing waiting")
        server.send(Core.tick(id, 1))
        #expect(Core.readable(client.fileDescriptor, waitingMs: 1000), "a tick waiting")
        client.dispatch(timeoutMs: 0)
        #expect(!Core.readable(client.fileDescriptor, waitingMs: 50), "the tick was read")
    }

    @Test func afterTheLastUnsubscribeTheSocketClosesAndANewSubscriptionReconnects() throws {
        let server = ScriptedServer()
        let connects = Counter()
        var config = VsyncClient.Configuration(socketPath: "/scripted", clientName: "core-test")
        config.idleCloseNs = 50_000_000
        let inner = server.connector()
        config.connector = VsyncClient.Connector { path in connects.add(); return inner.open(path) }
        let client = try VsyncClient(config)
        let id = client.subscribe(.primary, range: .default)
        try Core.welcome(client, server)
        client.unsubscribe(id)
        #expect(try server.received() == [.unsubscribe(subscriptionID: id)])
        _ = Core.run(client, forMs: 150)
        #expect(!client.isConnected, "closed after the idle time")
        #expect(!Core.readable(client.fileDescriptor, waitingMs: 50), "nothing to do while idle")
        _ = client.subscribe(.primary, range: .default)
        #expect(connects.value == 2)
        guard case .hello? = try server.received().first else {
            Issue.record("no HELLO on the new connection")
            return
        }
    }
}
