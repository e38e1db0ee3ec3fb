import Glibc
import Testing
import VsyncClientCore
import VsyncCore

@Suite("Client core: delivery")
struct DeliveryTests {
    @Test func severalSubscriptionsInOneReadEachGetTheirNewestAfterTheControlMessages() throws {
        let server = ScriptedServer()
        let client = try Core.client(server)
        let a = client.subscribe(.primary, range: .default)
        let b = client.subscribe(.primary, range: FrameRateRange(preferredFramesPerSecond: 30))
        try Core.welcome(client, server)
        _ = Core.events(client)
        server.send(Core.tick(a, 10))
        server.send(Core.tick(b, 10, divisor: 2))
        server.send(Core.subscribed(a))
        server.send(Core.tick(a, 11))
        server.send(Core.tick(b, 12, divisor: 2))
        let count = client.dispatch(timeoutMs: 1000)
        let events = Core.events(client)
        #expect(count == 2)
        guard events.count == 3, case .subscribed = events[0] else {
            Issue.record("expected SUBSCRIBED then two frames: \(events)")
            return
        }
        let frames = Core.frames(events)
        #expect(frames.map(\.subscriptionID).sorted() == [a, b].sorted())
        #expect(frames.first { $0.subscriptionID == a }.map { "\($0.sequence)/\($0.skipped)" } == "11/1")
        #expect(frames.first { $0.subscriptionID == b }.map { "\($0.sequence)/\($0.skipped)" } == "12/1")
    }

    /// More datagrams than one read batch takes: all are read, one frame comes out.
    @Test func aBacklogLargerThanOneReadBatchCoalescesToOneFrame() throws {
        let server = ScriptedServer()
        let client = try Core.client(server)
        let id = client.subscribe(.primary, range: .default)
        try Core.welcome(client, server)
        _ = Core.events(client)
        for seq in 100..<150 as Range<UInt64> { server.send(Core.tick(id, seq)) }
        #expect(client.dispatch(timeoutMs: 1000) == 1)
        let frames = Core.frames(Core.events(client))
        #expect(frames.count == 1)
        #expect(frames.first?.sequence == 149)
        #expect(frames.first?.skipped == 49, "every replaced tick is counted")
        #expect(!Core.readable(client.fileDescriptor), "nothing left to read")
    }

    @Test func displayEventsReachOnlySubscriptionsOnThatDisplayAndUpdateThem() throws {
        let server = ScriptedServer()
        let client = try Core.client(server)
        let on1 = client.subscribe(.primary, range: .default)
        let on2 = client.subscribe(.crtc(50), range: .default)
        try Core.welcome(client, server)
        var other = Core.display
        other.displayID = 2
        other.crtcID = 50
        server.send(Core.subscribed(on1))
        server.send(Core.subscribed(on2, display: other))
        client.dispatch(timeoutMs: 1000)
        _ = Core.events(client)
        var changed = Core.display
        changed.refreshMillihertz = 144_000
        changed.periodNs = 6_944_444
        server.send(.displayEvent(DisplayEvent(kind: .modeChanged, display: changed)))
        client.dispatch(timeoutMs: 1000)
        let events = Core.events(client)
        #expect(events == [.display(subscriptionID: on1, DisplayEvent(kind: .modeChanged, display: changed))])
        #expect(client.subscription(on1)?.display?.refreshMillihertz == 144_000)
        #expect(client.subscription(on1)?.displayIntervalNs == 6_944_444)
        #expect(client.subscription(on2)?.display?.refreshMillihertz == 60_000)
    }

    /// A tick read before a mode change in the same read is still handed out (the newest for
    /// its subscription), but the interval and divisor the subscription keeps are the newer
    /// ones: what DisplayLink's `duration` reads in the modeChanged handler.
    @Test func aTickReadBeforeAModeChangeDoesNotUndoIt() throws {
        let server = ScriptedServer()
        let client = try Core.client(server)
        let id = client.subscribe(.primary, range: FrameRateRange(preferredFramesPerSecond: 30))
        try Core.welcome(client, server)
        server.send(Core.subscribed(id, divisor: 2))
        client.dispatch(timeoutMs: 1000)
        _ = Core.events(client)
        var changed = Core.display
        changed.refreshMillihertz = 120_000
        changed.periodNs = 8_333_333
        server.send(Core.tick(id, 10, divisor: 2))
        server.send(.displayEvent(DisplayEvent(kind: .modeChanged, display: changed)))
        server.send(Core.subscribed(id, divisor: 4, display: changed))
        client.dispatch(timeoutMs: 1000)
        let frames = Core.frames(Core.events(client))
        #expect(frames.map(\.sequence) == [10])
        #expect(client.subscription(id)?.displayIntervalNs == 8_333_333)
        #expect(client.subscription(id)?.divisor == 4)
    }

    @Test func aRemovedDisplayIsAnErrorAndAnAddedOneRenewsWhatWaitedForIt() throws {
        let server = ScriptedServer()
        let client = try Core.client(server)
        let id = client.subscribe(.primary, range: .default)
        try Core.welcome(client, server)
        server.send(Core.subscribed(id))
        client.dispatch(timeoutMs: 1000)
        _ = Core.events(client)
        server.send(.displayEvent(DisplayEvent(kind: .removed, display: Core.display)))
        client.dispatch(timeoutMs: 1000)
        let errors = Core.errors(Core.events(client))
        #expect(errors.count == 1 && errors.first?.0 == id && errors.first?.1 == .displayGone(name: "Virtual-1"))
        #expect(try server.received() == [.unsubscribe(subscriptionID: id)])
        #expect(client.subscription(id)?.active == false)
        server.send(.displayEvent(DisplayEvent(kind: .added, display: Core.display)))
        client.dispatch(timeoutMs: 1000)
        #expect(try server.received() == [.subscribe(Subscribe(subscriptionID: id, selector: .primary, range: .default))])
        #expect(client.subscription(id)?.active == true)
    }
}
