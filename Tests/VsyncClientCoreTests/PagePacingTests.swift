import Testing
import VsyncClientCore
import VsyncCore

/// Page pacing in the client core: a page-only subscription with a work duration is woken by
/// the core's own timer, aimed from the timing page the scripted server hands over.
@Suite("Page pacing") struct PagePacingTests {
    static let periodNs: UInt64 = 20_000_000
    static let workNs: UInt64 = 4_000_000

    /// The record of display 1 with vblank `anchor` at `anchorNs`, one period apart, the newest
    /// vblank `last`.
    static func timing(anchor: UInt64, anchorNs: UInt64, last: UInt64) -> VBlankTiming {
        VBlankTiming(displayID: 1, generation: 3, flags: VBlankTiming.on | VBlankTiming.current | 1, lastSequence: last,
                     lastTimestampNs: anchorNs + (last - anchor) * periodNs, anchorSequence: anchor, anchorNs: anchorNs,
                     periodWholeNs: periodNs, periodFraction: 0, refreshMillihertz: 50_000, updatedNs: anchorNs)
    }

    /// The core's wake-up comes after the vblank its frame was for (its process was not run in
    /// time): that frame is passed over, not handed out for a vblank already shown, and the next
    /// frame counts it in `skipped`, as the daemon's paced ticks do.
    @Test func aWakeAfterItsTargetsVBlankPassesTheFrameOverAndCountsIt() throws {
        let server = ScriptedServer()
        let client = try Core.client(server)
        let page = try TestPage()
        let now0 = Core.now()
        page.write(slot: 0, Self.timing(anchor: 100, anchorNs: now0, last: 100))
        let id = client.subscribe(.primary, range: .default, flags: .pageOnly, workDurationNs: Self.workNs)
        Core.welcome(client, server, page: page)
        server.send(Core.subscribed(id))
        client.dispatch(timeoutMs: 0)  // aims at vblank 101 (at now0 + 20 ms), woken 4 ms before
        #expect(Core.frames(Core.events(client)).isEmpty)

        // Before that wake, the display moves on 30 ms as the page tells it: vblank 101 came
        // 10 ms ago, as if this process had been descheduled past it.
        let moved = now0 - 30_000_000
        page.write(slot: 0, Self.timing(anchor: 100, anchorNs: moved, last: 101))
        var frames: [ClientFrame] = []
        let deadline = Core.now() + 2_000_000_000
        while frames.isEmpty && Core.now() < deadline {
            client.dispatch(timeoutMs: 100)
            frames = Core.frames(Core.events(client))
            // The display keeps going while the test waits: its newest vblank is the last due.
            let now = Core.now()
            page.write(slot: 0, Self.timing(anchor: 100, anchorNs: moved, last: 100 + (now - moved) / Self.periodNs))
        }
        let first = try #require(frames.first, "no page-paced frame in 2 s")
        #expect(first.targetSequence > first.sequence, "frame for vblank \(first.targetSequence), the newest is \(first.sequence)")
        #expect(first.targetTimestampNs > first.receivedNs, "handed out \(Double(first.receivedNs) - Double(first.targetTimestampNs)) ns after its vblank")
        // Every frame from 101, the one aimed at first, is handed out or counted.
        #expect(first.targetSequence - UInt64(first.skipped) == 101, "frame \(first.targetSequence), skipped \(first.skipped)")
    }

    /// The rule it follows (VsyncCore's `PagePacing.isDue`): on a fixed grid a frame is due
    /// until its vblank comes or its time goes by; under VRR until its vblank comes, however
    /// late by the clock (the display waits for it).
    @Test func aFrameIsDueUntilItsVBlankComes() {
        let t = Self.timing(anchor: 100, anchorNs: 1_000_000_000, last: 100)
        let at101 = t.timestamp(ofSequence: 101)
        #expect(PagePacing.isDue(t, target: 101, nowNs: at101 - 1))
        #expect(!PagePacing.isDue(t, target: 101, nowNs: at101))
        #expect(!PagePacing.isDue(t, target: 100, nowNs: 0))
        var variable = t
        variable.minimumIntervalNs = 6_944_444
        variable.maximumIntervalNs = 20_833_333
        #expect(PagePacing.isDue(variable, target: 101, nowNs: at101 + 10_000_000))
        variable.lastSequence = 101
        #expect(!PagePacing.isDue(variable, target: 101, nowNs: 0))
    }
}
