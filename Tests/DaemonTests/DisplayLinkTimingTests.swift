import DisplayLink
import Foundation
import Synchronization
import Testing
import VsyncCore

/// DisplayLink's timing-page read, through the shared connection's core, against the real
/// vsyncd on its timer source (60 Hz, display 1).
@Suite("DisplayLink timing page", .serialized)
struct DisplayLinkTimingTests {
    @Test(.timeLimit(.minutes(1)))
    func aPageOnlyLinkKeepsTheConnectionAndAnyThreadReadsTheTiming() async throws {
        let daemon = try DaemonProcess(hertz: 60)
        defer { _ = daemon.stop() }
        let socket = daemon.socketPath

        #expect(throws: DisplayLink.TimingError.noPage) { try DisplayLink.timing(of: 1, socketPath: socket) }
        let frames = Atomic<Int>(0)
        let link = DisplayLink(display: .primary, socketPath: socket) { _ in frames.add(1, ordering: .relaxed) }
        link.pageOnly = true
        #expect(link.pageOnly)
        link.start(on: DispatchQueue(label: "page-only"))
        defer { link.invalidate() }
        #expect(await eventually(timeout: 5) { (try? link.displayTiming())?.isCurrent == true })
        #expect(throws: DisplayLink.TimingError.displayNotOnPage) { try DisplayLink.timing(of: 2, socketPath: socket) }
        let mine = try link.displayTiming()
        #expect(mine.displayID == 1 && mine.refreshMillihertz == 60_000 && mine.isOn)

        // Two threads read while the reader thread runs the core: every read consistent, and
        // the vblanks only move forward.
        let bad = Atomic<Int>(0)
        let readers = (0..<2).map { _ in
            Thread {
                var last: UInt64 = 0
                for _ in 0..<100_000 {
                    // The timer source's grid is exact: the model's line runs through its vblanks.
                    guard let t = try? DisplayLink.timing(of: 1, socketPath: socket), abs(t.periodNs - 1e9 / 60) < 2,
                          t.lastSequence >= last, t.anchorNs &- t.lastTimestampNs &+ 1_000 <= 2_000,
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
        // Page only: the daemon sent the link no ticks, so no frame reached its handler.
        #expect(frames.load(ordering: .relaxed) == 0)
    }
}
