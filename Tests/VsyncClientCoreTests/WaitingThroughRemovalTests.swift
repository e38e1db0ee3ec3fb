import Testing
import VsyncClientCore
import VsyncCore

/// Protocol 3: a subscription by name or `primary` waits through its display's removal (the
/// daemon keeps it and sends a waiting SUBSCRIBED); one by display or CRTC id ends as before.
@Suite("Waiting through a removal (protocol 3)")
struct WaitingThroughRemovalTests {
    @Test func aNamedSubscriptionWaitsAndAnIdOneEnds() throws {
        let server = ScriptedServer()
        let client = try Core.client(server)
        let named = client.subscribe(.connector("Virtual-1"), range: .default)
        let byID = client.subscribe(.display(1), range: .default)
        server.send(.welcome(Welcome(version: 3, serverFlags: [], serverPID: 42)))
        client.dispatch(timeoutMs: 1000)
        _ = try server.received()
        server.send(Core.subscribed(named))
        server.send(Core.subscribed(byID))
        client.dispatch(timeoutMs: 1000)
        _ = Core.events(client)

        server.send(.displayEvent(DisplayEvent(kind: .removed, display: Core.display)))
        client.dispatch(timeoutMs: 1000)
        let events = Core.events(client)
        // The named one hears the removal and stays; the id one is gone, as in protocol 2.
        #expect(events.contains(.display(subscriptionID: named, DisplayEvent(kind: .removed, display: Core.display))))
        let errors = Core.errors(events)
        #expect(errors.count == 1 && errors.first?.0 == byID && errors.first?.1 == .displayGone(name: "Virtual-1"))
        #expect(try server.received() == [.unsubscribe(subscriptionID: byID)])
        #expect(client.subscription(named)?.active == true && client.subscription(byID)?.active == false)
    }
}
