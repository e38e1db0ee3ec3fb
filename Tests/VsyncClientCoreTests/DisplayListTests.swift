import Glibc
import Testing
import VsyncClientCore
import VsyncCore

/// `listDisplays`, libvsync's vsync_client_get_displays: it asks, waits for the answer, and
/// leaves what it read meanwhile for the app's next dispatch.
@Suite("Client core: display list")
struct DisplayListTests {
    @Test func theListAnswersAndFramesReadMeanwhileWaitForTheNextDispatch() throws {
        let server = ScriptedServer()
        let client = try Core.client(server)
        let id = client.subscribe(.primary, range: .default)
        try Core.welcome(client, server)
        _ = Core.events(client)
        // A tick on the way before the answer: the client reads it while it waits for the list.
        server.send(Core.tick(id, 10))
        server.send(.displayList([Core.display]))
        let displays = try client.listDisplays(timeoutNs: 2_000_000_000)
        #expect(displays == [Core.display])
        #expect(try server.received() == [.listDisplays])
        // The frame is queued, and the fd says so: a poll loop comes back to dispatch it.
        #expect(Core.readable(client.fileDescriptor), "the fd is not readable with a frame queued")
        client.dispatch(timeoutMs: 0)
        #expect(Core.frames(Core.events(client)).map(\.sequence) == [10])
        // Taken: the fd quiets down.
        client.dispatch(timeoutMs: 0)
        #expect(!Core.readable(client.fileDescriptor))
    }

    @Test func noAnswerInTimeIsATimeout() throws {
        let server = ScriptedServer()
        let client = try Core.client(server)
        _ = client.subscribe(.primary, range: .default)
        try Core.welcome(client, server)
        #expect(throws: ClientError.connectionFailed(socketPath: "/scripted", errno: ETIMEDOUT)) {
            try client.listDisplays(timeoutNs: 50_000_000)
        }
    }
}
