import Glibc
import Testing
import VsyncClientCore
import VsyncCore

/// Helpers shared by the core's suites: a client on a scripted server, handshaken.
enum Core {
    static let display = DisplayInfo(
        displayID: 1, crtcID: 35, connectorID: 36, state: .on, flags: [.hardwareClock, .primary],
        refreshMillihertz: 60_000, periodNs: 16_666_667, width: 1024, height: 768,
        connectorName: "Virtual-1", deviceName: "card0")

    static func client(_ server: ScriptedServer, configure: (inout VsyncClient.Configuration) -> Void = { _ in }) throws -> VsyncClient {
        var config = VsyncClient.Configuration(socketPath: "/scripted", clientName: "core-test")
        config.connector = server.connector()
        configure(&config)
        return try VsyncClient(config)
    }

    /// Sends WELCOME and lets the client take it; returns what the client sent after it.
    @discardableResult
    static func welcome(_ client: VsyncClient, _ server: ScriptedServer) throws -> [ClientMessage] {
        server.send(.welcome(Welcome(version: 1, serverFlags: [], serverPID: 42)))
        client.dispatch(timeoutMs: 1000)
        return try server.received()
    }

    static func events(_ client: VsyncClient) -> [ClientEvent] {
        var out: [ClientEvent] = []
        while let e = client.nextEvent() { out.append(e) }
        return out
    }

    static func frames(_ events: [ClientEvent]) -> [ClientFrame] {
        events.compactMap { if case .frame(let f) = $0 { f } else { nil } }
    }

    static func errors(_ events: [ClientEvent]) -> [(UInt32, ClientError)] {
        events.compactMap { if case .error(let id, let e) = $0 { (id, e) } else { nil } }
    }

    static func tick(_ id: UInt32, _ sequence: UInt64, skipped: UInt32 = 0, divisor: UInt32 = 1) -> ServerMessage {
        .tick(Tick(subscriptionID: id, displayID: 1, sequence: sequence, timestampNs: sequence * 16_666_667,
                   targetTimestampNs: (sequence + UInt64(divisor)) * 16_666_667, displayIntervalNs: 16_666_667,
                   clientIntervalNs: UInt64(divisor) * 16_666_667, skipped: skipped, divisor: divisor, flags: [.hardwareTimestamp]))
    }

    static func subscribed(_ id: UInt32, divisor: UInt32 = 1, display: DisplayInfo = Core.display) -> ServerMessage {
        .subscribed(Subscribed(subscriptionID: id, displayID: display.displayID, divisor: divisor,
                               displayIntervalNs: display.periodNs, clientIntervalNs: UInt64(divisor) * display.periodNs,
                               display: display))
    }

    /// Whether `fd` polls readable right now.
    static func readable(_ fd: Int32, waitingMs: Int32 = 0) -> Bool {
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&p, 1, waitingMs) == 1 && p.revents & Int16(POLLIN) != 0
    }

    /// Dispatches for about `ms`, collecting every event.
    static func run(_ client: VsyncClient, forMs ms: Int) -> [ClientEvent] {
        var out: [ClientEvent] = []
        let end = now() + UInt64(ms) * 1_000_000
        while now() < end {
            client.dispatch(timeoutMs: Int32(max(1, (end - now()) / 1_000_000)))
            out += events(client)
        }
        return out
    }

    static func now() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }
}
