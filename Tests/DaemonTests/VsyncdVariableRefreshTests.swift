import CVsyncPage
import Foundation
import Glibc
import Testing
import VsyncCore
@testable import VsyncClientCore
@testable import VsyncDaemon

extension VsyncdTests {
    /// Variable refresh through the server's poll of VRR_ENABLED (the kernel sends no event for it): read only
    /// while someone follows the display, at most once a frame; a toggle is one change.
    @Suite("vsyncd variable refresh (scripted source)") struct VariableRefresh {
        static let key = DisplayChanges.key
        static let shortestNs: UInt64 = 6_944_444

        static func display(enabled: Bool) -> SourceDisplay {
            var d = DisplayChanges.virtual1(hz: 144)
            d.variableRefresh = VariableRefreshState(capable: true, enabled: enabled, range: EDIDRefreshRange(minimumHz: 48, maximumHz: 144))
            return d
        }

        final class Clock {
            var sequence: UInt64 = 100
            var timestampNs: UInt64 = 5_000_000_000
        }

        /// Pushes one vblank `intervalNs` after the last and returns the messages up to its tick.
        static func vblank(_ source: ScriptedVBlankSource, _ client: RawClient, _ clock: Clock, intervalNs: UInt64) -> [ServerMessage] {
            source.push([.vblank(key, sequence: clock.sequence, timestampNs: clock.timestampNs)])
            let seq = clock.sequence
            clock.sequence += 1
            clock.timestampNs += intervalNs
            return client.messages { if case .tick(let t) = $0 { t.sequence == seq } else { false } }
        }

        static func isToggle(_ m: ServerMessage) -> Bool {
            if case .displayEvent(let e) = m { e.kind == .variableRefreshChanged } else { false }
        }

        @Test func pollsWhileFollowedAtMostOnceAFrameAndAToggleIsOneChange() throws {
            let source = ScriptedVBlankSource(displays: [Self.display(enabled: false)])
            let daemon = try InProcessDaemon(source: source)
            defer { daemon.stop() }
            let (client, _, fd) = try TimingPage.connect(daemon.socketPath, version: 5)
            try #require(fd >= 0)
            let page = try TimingPage.MappedPage(fd: fd)
            close(fd)
            // Listed but not followed: the property is never read.
            client.send(.listDisplays)
            let listed = client.messages { if case .displayList = $0 { true } else { false } }
            guard case .displayList(let displays)? = listed.last else { Issue.record("no list: \(listed)"); return }
            #expect(displays.first?.flags.contains(.variableCapable) == true && displays.first?.minIntervalNs == Self.shortestNs)
            #expect(source.variableRefreshPolls == 0)

            let sub = try client.subscribe(1, fps: 0, selector: .connector("Virtual-1"))
            #expect(!sub.display.flags.contains(.variable))
            // A page-only follower beside it: no TICK, with VRR on or off.
            let (pageClient, _, pageFD) = try TimingPage.connect(daemon.socketPath, version: 5)
            if pageFD >= 0 { close(pageFD) }
            _ = try pageClient.subscribe(1, fps: 0, flags: .pageOnly, selector: .connector("Virtual-1"))
            let g0 = sub.display.generation
            let clock = Clock()
            let start = monotonicNowNs()
            for _ in 0..<40 { _ = Self.vblank(source, client, clock, intervalNs: Self.shortestNs) }
            let polls = source.variableRefreshPolls, elapsed = monotonicNowNs() - start
            #expect(polls <= Int(elapsed / Self.shortestNs) + 1, "\(polls) reads in \(elapsed) ns: more than one a frame")

            // The compositor turns VRR on (no event from the kernel). The vblanks stay on the
            // grid, so no deviating interval prompts a re-read: only the poll can see it.
            source.update { $0[0] = Self.display(enabled: true) }
            var seen: [ServerMessage] = []
            var deadline = Date().addingTimeInterval(3)
            while Date() < deadline, !seen.contains(where: Self.isToggle) {
                seen += Self.vblank(source, client, clock, intervalNs: Self.shortestNs)
            }
            #expect(source.variableRefreshPolls >= 1)
            let event = seen.compactMap { if case .displayEvent(let e) = $0 { e } else { nil } }
            #expect(event.map(\.kind) == [.variableRefreshChanged], "\(event)")
            #expect(event.first?.display.flags.contains(.variable) == true && event.first?.display.generation == g0 &+ 1)
            #expect(event.first?.display.clock != nil, "a display event carries its clock pair")
            // From the next vblank: variable, aimed at the earliest next vblank, one generation,
            // and intervals from 7 to 20.8 ms re-read nothing (on a fixed grid each would).
            var ticks: [Tick] = []
            let rereads = source.refreshes
            for interval in [9_000_000, 20_000_000, 7_000_000, 15_000_000, 20_800_000, 6_944_444, 11_000_000] as [UInt64] {
                ticks += Self.vblank(source, client, clock, intervalNs: interval).compactMap { if case .tick(let t) = $0 { t } else { nil } }
            }
            #expect(ticks.count == 7)
            #expect(source.refreshes == rereads, "the CRTC was re-read \(source.refreshes - rereads) times under VRR")
            #expect(pageClient.drain().allSatisfy { if case .tick = $0 { false } else { true } }, "a page-only follower got a TICK")
            for t in ticks {
                #expect(t.flags.contains(.variable) && t.generation == g0 &+ 1)
                #expect(t.targetTimestampNs == t.timestampNs + Self.shortestNs && t.displayIntervalNs == Self.shortestNs)
            }
            // The timing page says the same (written before the ticks go out): variable, and a
            // line from the newest vblank at the shortest interval, the earliest next vblank.
            let record = try #require(page.record(sub.displayID))
            let last = try #require(ticks.last)
            #expect(record.flags & DisplayFlags.variable.rawValue != 0 && record.generation == g0 &+ 1)
            #expect(record.last_sequence == last.sequence && record.anchor_ns == last.timestampNs && record.period_ns == Self.shortestNs)
            #expect(record.min_interval_ns == Self.shortestNs && record.max_interval_ns == 20_833_333)
            #expect(VBlankTiming(record).nextVBlank(after: last.timestampNs)?.timestampNs == last.timestampNs + Self.shortestNs)

            // Off again: found by the poll alone (intervals under VRR are not checked), one more
            // generation, and ticks on the refresh model again.
            source.update { $0[0] = Self.display(enabled: false) }
            seen = []
            deadline = Date().addingTimeInterval(3)
            while Date() < deadline, !seen.contains(where: Self.isToggle) {
                seen += Self.vblank(source, client, clock, intervalNs: Self.shortestNs)
            }
            let off = seen.compactMap { if case .displayEvent(let e) = $0 { e } else { nil } }
            #expect(off.map(\.kind) == [.variableRefreshChanged] && off.first?.display.flags.contains(.variable) == false)
            #expect(off.first?.display.generation == g0 &+ 2)
            let fixed = Self.vblank(source, client, clock, intervalNs: Self.shortestNs).compactMap { if case .tick(let t) = $0 { t } else { nil } }
            #expect(fixed.count == 1 && fixed.allSatisfy { !$0.flags.contains(.variable) && $0.generation == g0 &+ 2 })
            let gridRecord = try #require(page.record(sub.displayID))
            #expect(gridRecord.flags & DisplayFlags.variable.rawValue == 0 && gridRecord.min_interval_ns == 0 && gridRecord.max_interval_ns == 0)

            // Unsubscribed: vblank events stop, and so do the reads.
            client.send(.unsubscribe(subscriptionID: 1))
            client.send(.listDisplays)
            _ = client.messages { if case .displayList = $0 { true } else { false } }
            let after = source.variableRefreshPolls
            source.push([.vblank(Self.key, sequence: clock.sequence, timestampNs: clock.timestampNs)])
            client.send(.listDisplays)
            _ = client.messages { if case .displayList = $0 { true } else { false } }
            #expect(source.variableRefreshPolls == after)
        }
    }
}
