import Foundation
import Glibc
import Synchronization
import Testing
import VsyncCore
@testable import VsyncDaemon

extension VsyncdTests {
    /// Protocol 4's configuration generation: one bump per change of mode,
    /// on/off or model reset, in every tick and record; version 3 clients see none of it.
    @Suite("vsyncd configuration generations (scripted source)") struct Generations {
        typealias Changes = DisplayChanges

        /// CLOCK_BOOTTIME − CLOCK_MONOTONIC as the server's suspend check reads it: the test
        /// moves it ahead to stand for a suspend.
        final class Asleep: Sendable {
            let ns = Atomic<UInt64>(0)
            var clocks: @Sendable () -> (monotonicNs: UInt64, boottimeNs: UInt64) {
                { [self] in
                    let (mono, boot) = DisplaySet.readSuspendClocks()
                    return (mono, boot &+ ns.load(ordering: .relaxed))
                }
            }
        }

        static func event(_ kind: DisplayEventKind, in messages: [ServerMessage]) -> DisplayEvent? {
            messages.compactMap { if case .displayEvent(let e) = $0, e.kind == kind { e } else { nil } }.last
        }

        static func ticks(_ messages: [ServerMessage]) -> [Tick] {
            messages.compactMap { if case .tick(let t) = $0 { t } else { nil } }
        }

        @Test func eachChangeBumpsTheGenerationOnce() throws {
            let source = ScriptedVBlankSource(displays: [Changes.virtual1(hz: 60)])
            let asleep = Asleep()
            let daemon = try InProcessDaemon(source: source, clocks: asleep.clocks)
            defer { daemon.stop() }
            let client = try RawClient(path: daemon.socketPath)
            try client.handshake(version: 4)
            let old = try RawClient(path: daemon.socketPath)
            try old.handshake(version: 3)
            let sub = try client.subscribe(1, fps: 30, selector: .connector("Virtual-1"))
            _ = try old.subscribe(1, fps: 30, selector: .connector("Virtual-1"))
            let g0 = sub.display.generation

            // Steady vblanks: every tick has the generation of the SUBSCRIBED record.
            var next = Changes.vblanks(source, 100...111, hz: 60, start: 5_000_000_000)
            var ticks: [Tick] = []
            while ticks.count < 6, let t = client.nextTick() { ticks.append(t) }
            #expect(ticks.count == 6 && ticks.allSatisfy { $0.generation == g0 }, "\(ticks.map(\.generation)) vs \(g0)")

            // A mode change: one bump, in the event, the new SUBSCRIBED and the ticks after.
            source.update { $0[0] = Changes.virtual1(hz: 144) }
            next = Changes.vblanks(source, 112...113, hz: 144, start: next)
            var changed = client.messages { if case .displayEvent(let e) = $0 { e.kind == .modeChanged } else { false } }
            next = Changes.vblanks(source, 114...160, hz: 144, start: next)
            changed += client.messages { if case .tick(let t) = $0 { t.divisor == 5 && t.sequence >= 150 } else { false } }
            #expect(Self.event(.modeChanged, in: changed)?.display.generation == g0 + 1)
            let resubscribed = changed.compactMap { if case .subscribed(let s) = $0 { s } else { nil } }
            #expect(!resubscribed.isEmpty && resubscribed.allSatisfy { $0.display.generation == g0 + 1 })
            let fast = Self.ticks(changed).filter { $0.divisor == 5 }
            #expect(!fast.isEmpty && fast.allSatisfy { $0.generation == g0 + 1 }, "\(fast.map(\.generation))")

            // Off, then on again at another mode: one bump each (the on's modeChanged shares it).
            source.update { $0[0] = Changes.virtual1(hz: 144, active: false) }
            source.push([.failed(Changes.key, .off)])
            let offMessages = client.messages { if case .displayEvent(let e) = $0 { e.kind == .off } else { false } }
            #expect(Self.event(.off, in: offMessages)?.display.generation == g0 + 2)
            source.update { $0[0] = Changes.virtual1(hz: 60) }
            let onMessages = client.messages { if case .subscribed = $0 { true } else { false } }
            #expect(Self.event(.on, in: onMessages)?.display.generation == g0 + 3)
            #expect(Self.event(.modeChanged, in: onMessages)?.display.generation == g0 + 3)
            #expect(waitUntil(timeout: 1) { source.isActive(Changes.key) })
            next = Changes.vblanks(source, 300...311, hz: 60, start: next + 1_000_000_000)
            let lit = client.messages { if case .tick(let t) = $0 { t.sequence == 310 } else { false } }
            #expect(!Self.ticks(lit).isEmpty && Self.ticks(lit).allSatisfy { $0.generation == g0 + 3 })

            // A suspend: CLOCK_BOOTTIME moved ahead 5 s; the next read resets the model, once.
            asleep.ns.store(5_000_000_000, ordering: .relaxed)
            next = Changes.vblanks(source, 900...911, hz: 60, start: next + 5_000_000_000)
            var resumed = client.messages { if case .tick(let t) = $0 { t.sequence == 910 } else { false } }
            next = Changes.vblanks(source, 912...931, hz: 60, start: next)
            resumed += client.messages { if case .tick(let t) = $0 { t.sequence == 930 } else { false } }
            let after = Self.ticks(resumed)
            #expect(after.count >= 10 && after.allSatisfy { $0.generation == g0 + 4 }, "\(after.map(\.generation))")

            // The list says the same generation; a version 3 client never sees one.
            client.send(.listDisplays)
            let listed = client.messages { if case .displayList = $0 { true } else { false } }
            guard case .displayList(let list)? = listed.last else { Issue.record("no list"); return }
            #expect(list.first?.generation == g0 + 4)
            #expect(list.first?.timing.samples ?? 0 > 0)
            let oldMessages = old.drain()
            #expect(!Self.ticks(oldMessages).isEmpty && Self.ticks(oldMessages).allSatisfy { $0.generation == 0 })
            for m in oldMessages {
                switch m {
                case .displayEvent(let e): #expect(e.display.generation == 0)
                case .subscribed(let s): #expect(s.display.generation == 0)
                default: break
                }
            }
            _ = next
        }

        /// A mode change the model sees first (a late read with many of the new mode's vblanks:
        /// it restarts on the new period before the CRTC is re-read) is still one change.
        @Test func aModeChangeTheModelSawFirstBumpsOnce() throws {
            let source = ScriptedVBlankSource(displays: [Changes.virtual1(hz: 60)])
            let daemon = try InProcessDaemon(source: source)
            defer { daemon.stop() }
            let client = try RawClient(path: daemon.socketPath)
            try client.handshake(version: 4)
            let g0 = try client.subscribe(1, fps: 0, selector: .connector("Virtual-1")).display.generation
            var next = Changes.vblanks(source, 100...130, hz: 60, start: 5_000_000_000)
            var ticks = Self.ticks(client.messages { if case .tick(let t) = $0 { t.sequence == 130 } else { false } })
            #expect(ticks.allSatisfy { $0.generation == g0 })
            source.update { $0[0] = Changes.virtual1(hz: 144) }
            next = Changes.vblanks(source, 131...150, hz: 144, start: next)  // one read: the model restarts mid-way
            var changed = client.messages { if case .displayEvent(let e) = $0 { e.kind == .modeChanged } else { false } }
            next = Changes.vblanks(source, 151...170, hz: 144, start: next)
            changed += client.messages { if case .tick(let t) = $0 { t.sequence == 170 } else { false } }
            #expect(Self.event(.modeChanged, in: changed)?.display.generation == g0 + 1)
            ticks = Self.ticks(changed)
            #expect(ticks.allSatisfy { $0.generation == g0 || $0.generation == g0 + 1 }, "\(ticks.map(\.generation))")
            #expect(ticks.last?.generation == g0 + 1)
            _ = next
        }

        /// A new phase (vblanks back off the model's grid after a silence over a second) is a
        /// change only if the daemon was waiting for them all along: that is a suspend (or a
        /// stalled CRTC) as the vblanks show it. After an idle spell (paused: vblank events
        /// off) the model only catches up with a grid nobody was told of.
        @Test func aNewPhaseIsAChangeOnlyWhenTheDaemonWaitedForTheVBlanks() throws {
            let source = ScriptedVBlankSource(displays: [Changes.virtual1(hz: 60)])
            let daemon = try InProcessDaemon(source: source)
            defer { daemon.stop() }
            let client = try RawClient(path: daemon.socketPath)
            try client.handshake(version: 4)
            let g0 = try client.subscribe(1, fps: 0, selector: .connector("Virtual-1")).display.generation
            let moved: UInt64 = 5_000_000_000 + 6_666_667  // 5 s and 0.4 of a frame later
            var next = Changes.vblanks(source, 100...130, hz: 60, start: 5_000_000_000)
            _ = client.messages { if case .tick(let t) = $0 { t.sequence == 130 } else { false } }
            client.send(.pause(subscriptionID: 1))
            #expect(waitUntil(timeout: 1) { !source.isActive(Changes.key) })
            client.send(.resume(subscriptionID: 1))
            #expect(waitUntil(timeout: 1) { source.isActive(Changes.key) })
            next = Changes.vblanks(source, 131...150, hz: 60, start: next + moved)
            let afterIdle = Self.ticks(client.messages { if case .tick(let t) = $0 { t.sequence == 150 } else { false } })
            #expect(afterIdle.count >= 10 && afterIdle.allSatisfy { $0.generation == g0 }, "after an idle spell: \(afterIdle.map(\.generation))")
            next = Changes.vblanks(source, 151...170, hz: 60, start: next + moved)
            let afterSilence = Self.ticks(client.messages { if case .tick(let t) = $0 { t.sequence == 170 } else { false } })
            #expect(afterSilence.count >= 10 && afterSilence.allSatisfy { $0.generation == g0 + 1 }, "after a silence while followed: \(afterSilence.map(\.generation))")
            _ = next
        }
    }
}
