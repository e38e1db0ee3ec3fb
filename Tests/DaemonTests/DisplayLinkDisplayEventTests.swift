@testable import DisplayLink
import Foundation
import Glibc
import Synchronization
import Testing
import VsyncCore
@testable import VsyncDaemon

/// Pushes vblanks into a ``ScriptedVBlankSource`` at a display's rate, with the evenly spaced
/// timestamps a kernel gives, the way a CRTC would: the real server on a scripted display, for
/// what vsyncd's timer source never does (change mode, turn off, go away).
final class VblankPump: Sendable {
    private struct State {
        var hz: Double
        var running = true
        var lit = true
        var sequence: UInt64 = 1000
        var timestampNs: UInt64
    }
    private let state: Mutex<State>
    private let finished = DispatchSemaphore(value: 0)

    init(source: ScriptedVBlankSource, key: DisplayKey, hz: Double) {
        state = Mutex(State(hz: hz, timestampNs: monotonicNowNs()))
        Thread.detachNewThread { [self] in
            while true {
                let next = state.withLock { s -> (UInt64, UInt64, Bool)? in
                    guard s.running else { return nil }
                    s.sequence += 1
                    s.timestampNs += UInt64((1e9 / s.hz).rounded())
                    return (s.sequence, s.timestampNs, s.lit)
                }
                guard let (sequence, timestampNs, lit) = next else { break }
                // Sleeps until the vblank's time, as the hardware's clock would be at it.
                var ts = timespec(tv_sec: Int(timestampNs / 1_000_000_000), tv_nsec: Int(timestampNs % 1_000_000_000))
                _ = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nil)
                if lit { source.push([.vblank(key, sequence: sequence, timestampNs: timestampNs)]) }
            }
            finished.signal()
        }
    }

    /// The display's new refresh rate, from the next vblank on.
    func setRate(_ hz: Double) { state.withLock { $0.hz = hz } }
    /// Dark: no vblank events (an off CRTC has none).
    func setLit(_ lit: Bool) { state.withLock { $0.lit = lit } }

    func stop() {
        state.withLock { $0.running = false }
        finished.wait()
    }
}

extension DisplayLinkTests {
    /// Display events through the whole library: the real server (`InProcessDaemon`) on a
    /// scripted display, the real client core, DisplayLink's handlers and properties.
    @Suite
    struct DisplayEvents {
        static let key = DisplayKey(device: "/dev/dri/card0", crtcID: 40)

        static func virtual1(hz: Double, lit: Bool = true) -> SourceDisplay {
            SourceDisplay(key: key, connectorID: 41, connectorName: "Virtual-1", deviceName: "card0",
                          isActive: lit, refresh: RefreshRate(hertz: hz), width: 1024, height: 768)
        }

        @Test func displayChangesReachTheHandlerAndProperties() async throws {
            let source = ScriptedVBlankSource(displays: [Self.virtual1(hz: 60)])
            let daemon = try InProcessDaemon(source: source)
            defer { daemon.stop() }
            let pump = VblankPump(source: source, key: Self.key, hz: 60)
            defer { pump.stop() }
            let recorder = LinkRecorder()
            let changes = Mutex<[DisplayLink.DisplayChange]>([])
            let link = DisplayLink(socketPath: daemon.socketPath, handler: recorder.handler())
            link.displayChangeHandler = { change in changes.withLock { $0.append(change) } }
            link.errorHandler = recorder.errorHandler()
            link.start(on: DispatchQueue(label: "change"))
            #expect(await eventually(timeout: 3) { recorder.count >= 3 })
            #expect(link.maximumFramesPerSecond == 60)
            #expect(!link.isSynthetic)

            // A new mode, noticed by vsyncd from the vblank intervals.
            source.update { $0[0] = Self.virtual1(hz: 120) }
            pump.setRate(120)
            #expect(await eventually(timeout: 3) { changes.withLock { $0.contains(.modeChanged(refreshHz: 120)) } })
            #expect(link.maximumFramesPerSecond == 120)
            // The interval follows with the event or, when a tick of the old mode was read in
            // the same batch, with the next tick.
            #expect(await eventually(timeout: 1) { abs(link.duration - 1.0 / 120) < 1e-4 }, "duration \(link.duration)")

            // Off: the vblank wait fails, and the link is told.
            source.update { $0[0] = Self.virtual1(hz: 120, lit: false) }
            pump.setLit(false)
            source.push([.failed(Self.key, .off)])
            #expect(await eventually(timeout: 3) { changes.withLock { $0.last } == .off })
            let whileOff = recorder.count

            // On again (found by vsyncd's poll): told, and frames come again.
            source.update { $0[0] = Self.virtual1(hz: 120) }
            pump.setLit(true)
            #expect(await eventually(timeout: 3) { changes.withLock { $0.last } == .on })
            #expect(await eventually(timeout: 3) { recorder.count >= whileOff + 3 })
            #expect(changes.withLock { $0 } == [.modeChanged(refreshHz: 120), .off, .on])
            #expect(recorder.errors.withLock { $0.isEmpty })
            // Protocol 4: the mode change, the off and the on are one generation each; frames
            // carry them in order (none while off), and the link's display says the last.
            let generations = recorder.all.map(\.frame.generation)
            let g0 = try #require(generations.first)
            #expect(zip(generations, generations.dropFirst()).allSatisfy { $0 <= $1 }, "\(generations)")
            #expect(generations.last == g0 + 3 && link.displayGeneration == g0 + 3, "\(Set(generations).sorted()), link \(link.displayGeneration)")
            link.invalidate()
        }

        /// The names an app matches its window's output by reach DisplayLink: the display list
        /// before a link is made, and the display a link selected by EDID is on.
        @Test func displaysAndTheirIdentityReachDisplayLink() async throws {
            let dell = EDIDIdentity(pnpID: "DEL", productCode: 0x2005, serialNumber: 0x0101_0101, productName: "D1918H",
                                    serialText: "2C8FJ8255K5E", manufacturerName: "Dell Inc.")
            var monitor = Self.virtual1(hz: 60)
            monitor.busPath = "pci-0000:03:00.0"
            monitor.edid = dell
            let source = ScriptedVBlankSource(displays: [monitor])
            let daemon = try InProcessDaemon(source: source)
            defer { daemon.stop() }
            let pump = VblankPump(source: source, key: Self.key, hz: 60)
            defer { pump.stop() }
            let listed = try DisplayLink.displays(socketPath: daemon.socketPath)
            #expect(listed.map(\.connectorName) == ["Virtual-1"])
            #expect(listed.first.map { [$0.busPath, $0.edidMake, $0.edidModel, $0.edidSerial] } == ["pci-0000:03:00.0", "Dell Inc.", "D1918H", "2C8FJ8255K5E"])
            let recorder = LinkRecorder()
            let link = DisplayLink(display: try DisplaySelector.parse("edid:DEL/D1918H"), socketPath: daemon.socketPath, handler: recorder.handler())
            link.errorHandler = recorder.errorHandler()
            #expect(link.currentDisplay == nil, "not subscribed yet")
            link.start(on: DispatchQueue(label: "identity"))
            #expect(await eventually(timeout: 3) { recorder.count >= 2 })
            #expect(link.currentDisplay?.connectorName == "Virtual-1" && link.currentDisplay?.edidSerial == "2C8FJ8255K5E")
            #expect(link.currentDisplay?.displayID == listed.first?.displayID)
            link.invalidate()
        }

        /// Protocol 3: a link by connector name waits while its display is gone (a cable pulled,
        /// a card removed) and follows it back; a link by display id names what is gone.
        @Test func aDisplayThatGoesAwayIsWaitedForByNameAndAnErrorByID() async throws {
            let source = ScriptedVBlankSource(displays: [Self.virtual1(hz: 60)])
            let daemon = try InProcessDaemon(source: source)
            defer { daemon.stop() }
            let pump = VblankPump(source: source, key: Self.key, hz: 60)
            defer { pump.stop() }
            let byName = LinkRecorder(), byID = LinkRecorder()
            let changes = Mutex<[DisplayLink.DisplayChange]>([])
            let named = DisplayLink(display: .connector("Virtual-1"), socketPath: daemon.socketPath, handler: byName.handler())
            named.errorHandler = byName.errorHandler()
            named.displayChangeHandler = { change in changes.withLock { $0.append(change) } }
            named.start(on: DispatchQueue(label: "by-name"))
            #expect(await eventually(timeout: 3) { byName.count >= 2 })
            let id = try #require(named.currentDisplay?.displayID)
            let numbered = DisplayLink(display: .display(id), socketPath: daemon.socketPath, handler: byID.handler())
            numbered.errorHandler = byID.errorHandler()
            numbered.start(on: DispatchQueue(label: "by-id"))
            #expect(await eventually(timeout: 3) { byID.count >= 2 })

            source.update { $0.removeAll() }
            source.push([.devicesChanged])
            #expect(await eventually(timeout: 3) { changes.withLock { $0.contains(.waiting) } })
            #expect(await eventually(timeout: 3) { byID.errors.withLock { $0.contains(.displayGone(name: "Virtual-1")) } })
            #expect(byID.errors.withLock { $0.first?.description } == "display Virtual-1 is gone: create a new link for another display")
            #expect(byName.errors.withLock { $0.isEmpty }, "the link by name waits: \(byName.errors.withLock { $0 })")

            // Back: the link by name ticks again without being made anew.
            let before = byName.count
            source.update { $0 = [Self.virtual1(hz: 60)] }
            source.push([.devicesChanged])
            #expect(await eventually(timeout: 3) { byName.count >= before + 2 })
            named.invalidate()
            numbered.invalidate()
        }
    }
}
