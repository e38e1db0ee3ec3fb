import CVsyncPageMaker
import Glibc
import Testing
import VsyncClientCore
import VsyncCore

/// The client core and the timing page (protocol 5): TIMING_PAGE's descriptor mapped, checked
/// and read; every other descriptor closed; the page kept across a hang-up.
@Suite struct TimingPageTests {
    @Test func mapsThePageClosesItsDescriptorAndReadsRecords() throws {
        let server = ScriptedServer()
        let client = try Core.client(server)
        #expect(throws: TimingPageError.noPage) { try client.displayTiming(displayID: 1) }
        let page = try TestPage()
        page.write(slot: 3, Core.timing)
        _ = client.subscribe(.primary, range: .default)
        Core.welcome(client, server, page: page)
        page.closeFD()
        // The client closed its copy after mapping: no descriptor of the page is left open.
        #expect(page.openDescriptors == 0)
        #expect(client.timingPage.isMapped)
        #expect(client.timingPage.serverPID == UInt32(getpid()))
        #expect(try client.displayTiming(displayID: 1) == Core.timing)
        #expect(throws: TimingPageError.displayNotOnPage) { try client.displayTiming(displayID: 2) }
        #expect(throws: TimingPageError.displayNotOnPage) { try client.displayTiming(displayID: 0) }

        // A shared mapping: the daemon's next write shows, with no message.
        var next = Core.timing
        next.lastSequence += 1
        next.lastTimestampNs += 16_666_667
        page.write(slot: 3, next)
        #expect(try client.displayTiming(displayID: 1) == next)

        // The display moves to another slot: the cached index is stale, the scan finds it.
        var gone = next
        gone.displayID = 0
        page.write(slot: 3, gone)
        page.write(slot: 5, next)
        #expect(try client.displayTiming(displayID: 1) == next)
        page.write(slot: 5, gone)
        #expect(throws: TimingPageError.displayNotOnPage) { try client.displayTiming(displayID: 1) }
    }

    @Test func aVersion4DaemonGivesNoPage() throws {
        let server = ScriptedServer()
        let client = try Core.client(server)
        _ = client.subscribe(.primary, range: .default)
        server.send(.welcome(Welcome(version: 4, serverFlags: [], serverPID: 42)))
        client.dispatch(timeoutMs: 1000)
        #expect(client.isConnected)
        #expect(throws: TimingPageError.noPage) { try client.displayTiming(displayID: 1) }
        #expect(TimingPageError.noPage.errno == ENODATA)
        #expect(TimingPageError.displayNotOnPage.errno == ENOENT)
        #expect(TimingPageError.torn.errno == EAGAIN)
    }

    enum Bad: String, CaseIterable, Sendable {
        case magic, headerLayout, messageLayout, shortFile, headerPageSize, version4
    }

    /// A page that fails a check is not mapped (or unmapped again), and its descriptor is closed.
    @Test(arguments: Bad.allCases) func aPageThatFailsItsChecksIsClosedAndNotUsed(_ bad: Bad) throws {
        let server = ScriptedServer()
        let client = try Core.client(server)
        _ = client.subscribe(.primary, range: .default)
        let page: TestPage
        switch bad {
        case .magic: page = try TestPage(magic: 0x1234_5678)
        case .headerLayout: page = try TestPage(layout: 2)
        case .headerPageSize: page = try TestPage(headerPageSize: 8192)
        case .shortFile: page = try TestPage(size: 2048)
        case .messageLayout, .version4: page = try TestPage()
        }
        page.write(slot: 0, Core.timing)
        server.send(.welcome(Welcome(version: bad == .version4 ? 4 : 5, serverFlags: [], serverPID: 42)))
        server.sendTimingPage(fd: page.fd, pageSize: VSYNC_PAGE_SIZE, layout: bad == .messageLayout ? 2 : 1)
        client.dispatch(timeoutMs: 1000)
        page.closeFD()
        #expect(client.isConnected)
        #expect(page.openDescriptors == 0)
        #expect(client.timingPage.mappedCount == 0)
        #expect(throws: TimingPageError.noPage) { try client.displayTiming(displayID: 1) }
    }

    @Test func aDescriptorOnAnyOtherMessageIsClosedUnread() throws {
        let server = ScriptedServer()
        let client = try Core.client(server)
        let id = client.subscribe(.primary, range: .default)
        Core.welcome(client, server, page: nil)
        let stray = try TestPage()
        server.send(Core.subscribed(id), fd: stray.fd)
        server.send(Core.tick(id, 7), fd: stray.fd)
        client.dispatch(timeoutMs: 1000)
        stray.closeFD()
        #expect(stray.openDescriptors == 0)
        // The messages themselves still count.
        #expect(Core.frames(Core.events(client)).map(\.sequence) == [7])
        #expect(throws: TimingPageError.noPage) { try client.displayTiming(displayID: 1) }
    }

    @Test func thePageOutlivesAHangUpAndTheSameDaemonsPageIsNotMappedTwice() throws {
        let server = ScriptedServer()
        let client = try Core.client(server) { $0.initialBackoffNs = 1_000_000 }
        _ = client.subscribe(.primary, range: .default)
        let first = try TestPage()
        first.write(slot: 0, Core.timing)
        Core.welcome(client, server, page: first)
        server.hangUp()
        client.dispatch(timeoutMs: 100)
        #expect(!client.isConnected)
        // Spec § 10: the mapping outlives the connection.
        #expect(try client.displayTiming(displayID: 1) == Core.timing)

        // The same daemon again (the same memfd): the mapping is reused.
        _ = Core.run(client, forMs: 20)
        Core.welcome(client, server, page: first)
        #expect(client.isConnected)
        #expect(client.timingPage.mappedCount == 1)

        // A restarted daemon's new page replaces it; the old one stays mapped for readers.
        let second = try TestPage()
        var moved = Core.timing
        moved.generation = 9
        second.write(slot: 1, moved)
        server.hangUp()
        _ = Core.run(client, forMs: 20)
        Core.welcome(client, server, page: second)
        #expect(client.timingPage.mappedCount == 2)
        #expect(try client.displayTiming(displayID: 1) == moved)
        first.closeFD()
        second.closeFD()
        #expect(first.openDescriptors + second.openDescriptors == 0)
    }

    /// A reconnect keeps the old page current through WELCOME (no gap for readers); a protocol 5
    /// daemon whose next message is not TIMING_PAGE has none, and the old page stops being current.
    @Test func aNewConnectionWithoutAPageEndsTheOldOne() throws {
        let server = ScriptedServer()
        let client = try Core.client(server) { $0.initialBackoffNs = 1_000_000 }
        let id = client.subscribe(.primary, range: .default)
        let page = try TestPage()
        page.write(slot: 0, Core.timing)
        Core.welcome(client, server, page: page)
        server.hangUp()
        _ = Core.run(client, forMs: 20)
        server.send(.welcome(Welcome(version: 5, serverFlags: [], serverPID: 43)))
        client.dispatch(timeoutMs: 1000)
        #expect(client.isConnected)
        #expect(try client.displayTiming(displayID: 1) == Core.timing)
        server.send(Core.subscribed(id))
        client.dispatch(timeoutMs: 1000)
        #expect(throws: TimingPageError.noPage) { try client.displayTiming(displayID: 1) }
        // Still mapped (a reader on another thread may hold it) until the client goes.
        #expect(client.timingPage.mappedCount == 1)
    }

    @Test func aPageOnlySubscriptionSaysSoInItsSubscribe() throws {
        let server = ScriptedServer()
        let client = try Core.client(server)
        let id = client.subscribe(.primary, range: .default, flags: .pageOnly)
        server.send(.welcome(Welcome(version: 5, serverFlags: [], serverPID: 42)))
        client.dispatch(timeoutMs: 1000)
        let subscribes = try server.received().compactMap { if case .subscribe(let s) = $0 { s } else { nil } }
        #expect(subscribes.map(\.subscriptionID) == [id])
        #expect(subscribes.first?.flags.contains(.pageOnly) == true)
        #expect(SubscribeFlags.pageOnly.rawValue == 4)
    }
}
