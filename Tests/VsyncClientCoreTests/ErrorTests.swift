import Glibc
import Testing
import VsyncClientCore
import VsyncCore

@Suite("Client core: errors")
struct ErrorTests {
    @Test func serverErrorsReachTheSubscriptionTheyNameOrEveryOne() throws {
        let server = ScriptedServer()
        let client = try Core.client(server)
        let a = client.subscribe(.connector("HDMI-A-9"), range: .default)
        let b = client.subscribe(.primary, range: .default)
        try Core.welcome(client, server)
        _ = Core.events(client)
        server.send(.error(ErrorMessage(code: .unknownDisplay, subscriptionID: a, message: "no display matches")))
        server.send(.error(ErrorMessage(code: .unknownSubscription, subscriptionID: b, message: "raced an unsubscribe")))
        server.send(.error(ErrorMessage(code: .tooManySubscriptions, subscriptionID: b, message: "cap 64")))
        server.send(.error(ErrorMessage(code: .malformed, subscriptionID: 0, message: "bad request")))
        client.dispatch(timeoutMs: 1000)
        let errors = Core.errors(Core.events(client))
        let expected: [(UInt32, ClientError)] = [
            (a, .displayNotFound(selector: "'HDMI-A-9'", reason: "no display matches")),
            (b, .requestFailed(code: 7, reason: "cap 64")),
            (a, .requestFailed(code: 1, reason: "bad request")),
            (b, .requestFailed(code: 1, reason: "bad request")),
        ]
        #expect(errors.map(\.0) == expected.map(\.0))
        #expect(errors.map(\.1) == expected.map(\.1))
        #expect(client.subscription(a)?.active == false, "an unknown display waits for an `added` event")
        #expect(client.lastError == .requestFailed(code: 1, reason: "bad request"))
    }

    /// Malformed datagrams are reported, each problem once however often it repeats, and
    /// skipped; the connection stays.
    @Test func malformedServerMessagesAreReportedOnceEachAndTheConnectionKept() throws {
        let server = ScriptedServer()
        let client = try Core.client(server)
        let id = client.subscribe(.primary, range: .default)
        try Core.welcome(client, server)
        _ = Core.events(client)
        let tick = Core.tick(id, 5).encoded()
        server.sendRaw(Array(tick.prefix(20)))                          // truncated
        server.sendRaw(Array(tick.prefix(20)))                          // the same again: not reported again
        var badSize = tick
        badSize[2] = 71                                                 // size field disagrees
        server.sendRaw(badSize)
        var badName = ServerMessage.displayEvent(DisplayEvent(kind: .on, display: Core.display)).encoded()
        badName[16 + 48] = 0xFF                                         // connector name not UTF-8
        server.sendRaw(badName)
        server.sendRaw([UInt8](repeating: 0, count: 5000))              // over 4096 bytes
        server.sendRaw([0x99, 0x01, 8, 0, 0, 0, 0, 0])                  // a newer daemon's type: ignored
        server.send(Core.tick(id, 6))
        client.dispatch(timeoutMs: 1000)
        let events = Core.events(client)
        let errors = Core.errors(events)
        let texts = errors.map { "\($0.1)" }
        #expect(errors.count == 4, "four problems, each once: \(texts)")
        #expect(errors.allSatisfy { if case .protocolViolation = $0.1 { true } else { false } }, "\(texts)")
        for needle in ["header says \(Tick.wireSize) bytes but the datagram has 20", "header says 71 bytes", "not valid UTF-8", "over 4096 bytes"] {
            #expect(texts.contains { $0.contains(needle) }, "no report saying '\(needle)': \(texts)")
        }
        #expect(Core.frames(events).map(\.sequence) == [6], "the good tick after them still arrives")
        #expect(client.isConnected)
    }

    @Test func connectFailuresMapToWhatTheAppShouldDoAndAreReportedOnce() throws {
        for (errno, expected) in [(ENOENT, ClientError.noDaemon(socketPath: "/scripted")),
                                  (ECONNREFUSED, .noDaemon(socketPath: "/scripted")),
                                  (EACCES, .permissionDenied(socketPath: "/scripted")),
                                  (EMFILE, .connectionFailed(socketPath: "/scripted", errno: EMFILE))] {
            let attempts = Counter()
            var config = VsyncClient.Configuration(socketPath: "/scripted", clientName: "core-test")
            config.initialBackoffNs = 5_000_000
            config.maximumBackoffNs = 20_000_000
            config.connector = VsyncClient.Connector { _ in attempts.add(); return -errno }
            let client = try VsyncClient(config)
            let id = client.subscribe(.primary, range: .default)
            let events = Core.run(client, forMs: 200)
            let errors = Core.errors(events)
            #expect(errors.count == 1 && errors.first?.0 == id && errors.first?.1 == expected, "errno \(errno): \(errors)")
            // 5, 10, 20, 20 … ms apart: about 10 attempts in 200 ms, never a busy loop.
            #expect(attempts.value >= 4 && attempts.value <= 40, "errno \(errno): \(attempts.value) attempts in 200 ms")
        }
    }

    @Test func connectReturnsTheRefusalOrTimesOut() throws {
        let server = ScriptedServer()
        let client = try Core.client(server)
        // Refused: the server answers HELLO with REFUSED before connect() gives up.
        server.onConnect = { server in server.send(.refused(Refusal(code: .tooManyClients, message: "at the cap"))) }
        #expect(client.connect(timeoutNs: 2_000_000_000) == .refused(reason: "at the cap"))
        #expect(!client.isConnected)

        // A server that never answers: connect gives up at its own limit.
        let silent = ScriptedServer()
        let other = try Core.client(silent)
        let started = Core.now()
        #expect(other.connect(timeoutNs: 100_000_000) == .connectionFailed(socketPath: "/scripted", errno: ETIMEDOUT))
        #expect(Core.now() - started >= 90_000_000)
    }

    @Test func aRefusalSentJustBeforeTheDaemonClosesIsReadNotLost() throws {
        let refusal = ServerMessage.refused(Refusal(code: .tooManyClients, message: "full"))
        // At accept: the daemon refuses and closes before HELLO arrives, so sending HELLO fails
        // with EPIPE while the refusal waits unread.
        let atAccept = ScriptedServer()
        atAccept.onConnect = { server in
            server.send(refusal)
            server.hangUp()
        }
        let early = try Core.client(atAccept)
        #expect(early.connect(timeoutNs: 2_000_000_000) == .refused(reason: "full"))

        // After HELLO: the daemon refuses and closes with HELLO unread, so the client's first
        // read fails with ECONNRESET ahead of the refusal still queued behind it.
        let afterHello = ScriptedServer()
        let late = try Core.client(afterHello)
        let id = late.subscribe(.primary, range: .default)  // connects and sends HELLO, reads nothing
        afterHello.send(refusal)
        afterHello.hangUp()
        late.dispatch(timeoutMs: 1000)
        let errors = Core.errors(Core.events(late))
        #expect(errors.count == 1 && errors.first?.0 == id && errors.first?.1 == .refused(reason: "full"), "\(errors)")
    }
}

/// A connector-call counter the connector closure can share.
final class Counter: @unchecked Sendable {
    private var count = 0
    private let lock = NSLockish()
    func add() { lock.withLock { count += 1 } }
    var value: Int { lock.withLock { count } }
}

/// pthread mutex, enough for a counter (the tests import no Foundation).
final class NSLockish: @unchecked Sendable {
    private var mutex = pthread_mutex_t()
    init() { pthread_mutex_init(&mutex, nil) }
    func withLock<R>(_ body: () -> R) -> R {
        pthread_mutex_lock(&mutex)
        defer { pthread_mutex_unlock(&mutex) }
        return body()
    }
}

