import Foundation
import Testing
import VsyncCore

/// A client whose socket is full when its display changes (a mode change, VRR turning on or
/// off) while the vblank count goes on: the tick waiting for it then is one it did not get, and
/// the first tick after the change counts it in `skipped` with every other one it missed. (A
/// busy client is full at a change sooner or later: this makes it happen on purpose.)
@Suite("Coalesced ticks across a display change", .serialized)
struct CoalescingAcrossChangesTests {
    /// Replays `trace` (at 2×) to a client that does not read until a witness client has seen
    /// `change` and `after` more ticks; then the slow client's whole stream.
    static func stream(trace: String, change: DisplayEventKind, after: Int = 10) throws -> [ServerMessage] {
        let path = ReplayTraceTests.traces.appendingPathComponent(trace).path
        // The slow client stays full for about a second: well inside the stall bound.
        let daemon = try DaemonProcess(extra: ["--source", "replay:\(path)@2", "--stall-timeout", "30"])
        let slow = try RawClient(path: daemon.socketPath)
        try slow.handshake(name: "slow", version: 5)
        _ = slow.messages(timeout: 2) { if case .timingPage = $0 { true } else { false } }
        _ = try slow.subscribe(1, fps: 0)
        let witness = try RawClient(path: daemon.socketPath)
        try witness.handshake(name: "witness", version: 5)
        _ = witness.messages(timeout: 2) { if case .timingPage = $0 { true } else { false } }
        _ = try witness.subscribe(1, fps: 0)
        var changed = false, ticksAfter = 0
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline, ticksAfter < after, case .message(let m) = witness.receive(timeout: 2) {
            if case .displayEvent(let e) = m, e.kind == change { changed = true }
            if case .tick = m, changed { ticksAfter += 1 }
        }
        try #require(changed && ticksAfter == after, "the witness never saw \(change) and \(after) ticks after it: \(daemon.log)")
        var messages: [ServerMessage] = []
        while case .message(let m) = slow.receive(timeout: 0.5) {
            messages.append(m)
            if messages.count > 2_000 { break }
        }
        return messages
    }

    /// Every vblank from the first tick to the last is a tick or counted in a `skipped`.
    static func checkAccounted(_ messages: [ServerMessage], change: DisplayEventKind) {
        let ticks = messages.compactMap { if case .tick(let t) = $0 { t } else { nil } }
        #expect(ticks.count >= 10)
        // The slow client was full across the change: one tick counts many it did not get.
        #expect(ticks.contains { $0.skipped >= 20 }, "skipped: \(ticks.map(\.skipped).filter { $0 > 0 })")
        #expect(messages.contains { if case .displayEvent(let e) = $0 { e.kind == change } else { false } })
        for (a, b) in zip(ticks, ticks.dropFirst()) {
            #expect(b.sequence > a.sequence && b.sequence - a.sequence - 1 == UInt64(b.skipped),
                    "\(a.sequence) → \(b.sequence), skipped \(b.skipped)")
        }
    }

    @Test("a mode change while the client's socket is full: the ticks it missed are counted")
    func modeChange() throws {
        Self.checkAccounted(try Self.stream(trace: "mode-change.trace", change: .modeChanged), change: .modeChanged)
    }

    @Test("VRR turning on while the client's socket is full: the ticks it missed are counted")
    func variableRefreshToggle() throws {
        let change = DisplayEventKind.variableRefreshChanged
        Self.checkAccounted(try Self.stream(trace: "vrr-toggle.trace", change: change), change: change)
    }
}
