import DisplayLink
import Foundation
import Synchronization
import Testing
import VsyncCore

/// DisplayLink's timing-page read, through the shared connection's core, against page-check's
/// stand-in daemon (a real sealed memfd page at 60 Hz, Tests/libvsync/page-server.h) until
/// vsyncd's own page is on this branch. The stand-in answers no SUBSCRIBE, so this reads by id.
@Suite("DisplayLink timing page", .serialized)
struct DisplayLinkTimingTests {
    @Test(.timeLimit(.minutes(1)))
    func aPageOnlyLinkKeepsTheConnectionAndAnyThreadReadsTheTiming() async throws {
        let dir = try LibvsyncTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let check = try LibvsyncPageTests.pageCheck(in: dir)
        let socket = dir.appendingPathComponent("p.sock").path
        let server = Process()
        server.executableURL = URL(fileURLWithPath: check)
        server.arguments = ["serve", socket, "4"]
        let pipe = Pipe()
        server.standardOutput = pipe
        try server.run()
        defer { if server.isRunning { server.terminate() } }
        // Its first line says it listens.
        var first = Data()
        while !first.contains(UInt8(ascii: "\n")) {
            let chunk = pipe.fileHandleForReading.availableData
            try #require(!chunk.isEmpty, "the stand-in daemon ended before listening")
            first.append(chunk)
        }

        #expect(throws: DisplayLink.TimingError.noPage) { try DisplayLink.timing(of: 1, socketPath: socket) }
        // (That the daemon sends a page-only link no frames is the daemon side's test.)
        let link = DisplayLink(display: .display(1), socketPath: socket) { _ in }
        link.pageOnly = true
        #expect(link.pageOnly)
        link.start(on: DispatchQueue(label: "page-only"))
        defer { link.invalidate() }
        #expect(await eventually(timeout: 5) { (try? DisplayLink.timing(of: 1, socketPath: socket)) != nil })
        #expect(throws: DisplayLink.TimingError.displayNotOnPage) { try DisplayLink.timing(of: 2, socketPath: socket) }

        // Two threads read while the reader thread runs the core: every read consistent, and
        // the vblanks only move forward.
        let bad = Atomic<Int>(0)
        let readers = (0..<2).map { _ in
            Thread {
                var last: UInt64 = 0
                for _ in 0..<100_000 {
                    guard let t = try? DisplayLink.timing(of: 1, socketPath: socket), t.periodWholeNs == 16_666_666,
                          t.lastSequence >= last, t.anchorNs == t.lastTimestampNs,
                          let next = t.nextVBlank(after: t.lastTimestampNs), next.sequence == t.lastSequence + 1
                    else { bad.add(1, ordering: .relaxed); continue }
                    last = t.lastSequence
                }
            }
        }
        for reader in readers {
            reader.start()
        }
        let before = try DisplayLink.timing(of: 1, socketPath: socket)
        #expect(await eventually(timeout: 5) { ((try? DisplayLink.timing(of: 1, socketPath: socket))?.lastSequence ?? 0) > before.lastSequence + 3 })
        #expect(await eventually(timeout: 20) { readers.allSatisfy(\.isFinished) })
        #expect(bad.load(ordering: .relaxed) == 0)
    }
}
