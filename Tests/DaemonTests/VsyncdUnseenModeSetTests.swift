import Foundation
import Testing
import VsyncCore
@testable import VsyncDaemon

extension VsyncdTests.DisplayChanges {
    /// A mode set whose first vblanks never reached vsyncd (it was not scheduled, or its request
    /// was flushed): the first vblank it reads is off its model's grid and not next to the vblank
    /// before. The CRTC is re-read before that vblank is ticked, so its tick already carries the
    /// new mode's interval and a target on the new grid, after the mode-changed event.
    @Test func aModeSetSeenOnlyAfterAGapIsTickedOnTheNewGrid() throws {
        let source = ScriptedVBlankSource(displays: [Self.virtual1(hz: 60)])
        let daemon = try InProcessDaemon(source: source)
        defer { daemon.stop() }
        let client = try RawClient(path: daemon.socketPath)
        try client.handshake()
        _ = try client.subscribe(1, fps: 0, selector: .connector("Virtual-1"))
        let start: UInt64 = 5_000_000_000
        let next = Self.vblanks(source, 100...111, hz: 60, start: start)
        var ticks: [Tick] = []
        while ticks.count < 12, let t = client.nextTick() { ticks.append(t) }
        #expect(ticks.last?.sequence == 111)

        // 144 Hz from 100 ms after the last 60 Hz vblank; the kernel counted the gap's frames.
        source.update { $0[0] = Self.virtual1(hz: 144) }
        let first144 = next + 100_000_000 - 16_666_667
        let period144 = 1e9 / 144
        _ = Self.vblanks(source, 125...130, hz: 144, start: first144)
        let messages = client.messages { if case .tick(let t) = $0 { t.sequence == 125 } else { false } }
        let changed = messages.firstIndex { if case .displayEvent(let e) = $0 { e.kind == .modeChanged } else { false } }
        let tickIndex = messages.firstIndex { if case .tick = $0 { true } else { false } }
        #expect(changed != nil && tickIndex != nil && changed! < tickIndex!, "the mode change is told before the tick: \(messages)")
        guard case .tick(let tick)? = messages.last, tick.sequence == 125 else {
            Issue.record("no tick for the first vblank read after the mode set: \(messages)")
            return
        }
        #expect(abs(Double(tick.displayIntervalNs) - period144) < period144 * 0.01)
        #expect(abs(Double(tick.targetTimestampNs) - (Double(first144) + period144)) < 1_000, "target \(tick.targetTimestampNs)")
    }
}
