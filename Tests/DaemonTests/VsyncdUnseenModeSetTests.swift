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

    /// The other way round: the CRTC already reads the new mode (an atomic commit swaps its
    /// state in before scanout follows) while the old mode's last vblanks still come. Those are
    /// not ticked: no tick after the mode-changed event carries the old interval, and the model
    /// is not taught the old period, so the new mode's vblanks are ticked from its first.
    @Test func theOldModesVBlanksAfterTheNewModeWasReadAreNotTicked() throws {
        let source = ScriptedVBlankSource(displays: [Self.virtual1(hz: 60)])
        let daemon = try InProcessDaemon(source: source)
        defer { daemon.stop() }
        let client = try RawClient(path: daemon.socketPath)
        try client.handshake()
        _ = try client.subscribe(1, fps: 0, selector: .connector("Virtual-1"))
        var next = Self.vblanks(source, 100...111, hz: 60, start: 5_000_000_000)
        var ticks: [Tick] = []
        while ticks.count < 12, let t = client.nextTick() { ticks.append(t) }
        #expect(ticks.last?.sequence == 111)

        // The new mode is read (a rescan) before the old mode's last eight vblanks arrive.
        source.update { $0[0] = Self.virtual1(hz: 144) }
        source.push([.devicesChanged])
        let changed = client.messages { if case .displayEvent(let e) = $0 { e.kind == .modeChanged } else { false } }
        guard case .displayEvent(let event)? = changed.last else {
            Issue.record("no mode-changed event: \(changed)")
            return
        }
        #expect(event.display.refreshMillihertz == 144_000)
        next = Self.vblanks(source, 112...119, hz: 60, start: next)
        // Then the new mode's vblanks, after the commit's off and on (the count went on).
        _ = Self.vblanks(source, 125...160, hz: 144, start: next + 30_000_000)
        let after = client.messages { if case .tick(let t) = $0 { t.sequence == 160 } else { false } }
        let afterTicks = after.compactMap { if case .tick(let t) = $0 { t } else { nil } }
        #expect(afterTicks.first?.sequence == 125, "the first tick after the mode change: \(afterTicks.map(\.sequence))")
        #expect(afterTicks.allSatisfy { $0.sequence >= 125 }, "old-mode vblanks ticked: \(afterTicks.map(\.sequence))")
        let period144 = 1e9 / 144
        let off = afterTicks.filter { abs(Double($0.displayIntervalNs) - period144) > period144 * 0.01 }
        #expect(off.isEmpty, "ticks without the new mode's interval: \(off.map { ($0.sequence, $0.displayIntervalNs) })")
        // A client that reads late gets the newest tick with the ones it missed counted, so every
        // new-mode vblank is either ticked or counted as skipped.
        let seen = afterTicks.count + afterTicks.dropFirst().reduce(0) { $0 + Int($1.skipped) }
        #expect(afterTicks.last?.sequence == 160 && seen == 36, "\(afterTicks.map { ($0.sequence, $0.skipped) })")
    }
}
