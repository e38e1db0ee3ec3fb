@testable import DisplayLink
import Foundation
import Synchronization
import Testing
import VsyncCore
@testable import VsyncDaemon

extension DisplayLinkTests {
    /// Variable refresh through DisplayLink (protocol 5): the real server on a scripted
    /// VRR-capable display, its VRR_ENABLED turned on and off as a compositor would.
    @Suite
    struct VariableRefreshLink {
        static let key = DisplayEvents.key

        static func monitor(enabled: Bool) -> SourceDisplay {
            var d = DisplayEvents.virtual1(hz: 144)
            d.variableRefresh = VariableRefreshState(capable: true, enabled: enabled, range: EDIDRefreshRange(minimumHz: 48, maximumHz: 144))
            return d
        }

        @Test func variableRefreshReachesFramesHandlersAndProperties() async throws {
            let source = ScriptedVBlankSource(displays: [Self.monitor(enabled: false)])
            let daemon = try InProcessDaemon(source: source)
            defer { daemon.stop() }
            let pump = VblankPump(source: source, key: Self.key, hz: 144)
            defer { pump.stop() }
            let recorder = LinkRecorder()
            let changes = Mutex<[DisplayLink.DisplayChange]>([])
            let link = DisplayLink(socketPath: daemon.socketPath, handler: recorder.handler())
            link.displayChangeHandler = { change in changes.withLock { $0.append(change) } }
            link.start(on: DispatchQueue(label: "vrr"))
            #expect(await eventually(timeout: 3) { recorder.count >= 3 })
            #expect(!link.isVariable && recorder.all.allSatisfy { !$0.frame.isVariable })
            #expect(abs(link.minimumInterval - 6_944_444e-9) < 1e-9 && abs(link.maximumInterval - 20_833_333e-9) < 1e-9,
                    "\(link.minimumInterval) \(link.maximumInterval)")

            source.update { $0[0] = Self.monitor(enabled: true) }
            #expect(await eventually(timeout: 3) { changes.withLock { $0 } == [.variableRefresh(isOn: true)] })
            let on = recorder.count
            #expect(await eventually(timeout: 3) { recorder.count >= on + 3 })
            let variable = recorder.all.dropFirst(on + 1)
            #expect(variable.allSatisfy { $0.frame.isVariable }, "\(variable.map(\.frame.flags))")
            // The target is the earliest next vblank: the last plus the shortest interval.
            #expect(variable.allSatisfy { $0.frame.targetTimestampNanoseconds - $0.frame.timestampNanoseconds == 6_944_444 })
            #expect(link.isVariable && link.durationNanoseconds == 6_944_444)

            source.update { $0[0] = Self.monitor(enabled: false) }
            #expect(await eventually(timeout: 3) { changes.withLock { $0 } == [.variableRefresh(isOn: true), .variableRefresh(isOn: false)] })
            let off = recorder.count
            #expect(await eventually(timeout: 3) { recorder.count >= off + 3 })
            #expect(recorder.all.dropFirst(off + 1).allSatisfy { !$0.frame.isVariable })
            #expect(!link.isVariable)
            // One generation per toggle.
            let generations = recorder.all.map(\.frame.generation)
            #expect(Set(generations).count == 3, "\(Set(generations).sorted())")
            link.invalidate()
        }
    }
}
