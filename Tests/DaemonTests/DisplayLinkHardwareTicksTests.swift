@testable import DisplayLink
import Dispatch
import Foundation
import Testing
import VsyncCore

/// `DisplayLink.hardwareTicks` against the real vsyncd sampling vblanks sparsely (timer source,
/// 60 Hz), as `LibvsyncHardwareTicksTests` checks `vsync_link_set_hardware_ticks`.
extension DisplayLinkTests {
    @Suite
    struct HardwareTicks {
        /// A link with hardware ticks keeps its display's vblank events on: over 150 frames (2.5 s,
        /// longer than the model's learning and a burst interval) neither it nor a link without
        /// them gets a model-timed frame. Turned off on the running link, the events sleep and both
        /// get model-timed frames; on again, none.
        @Test(.timeLimit(.minutes(1)))
        func hardwareTicksKeepTheDisplaysVBlankEventsOnUntilTurnedOff() async throws {
            let daemon = try DaemonProcess(hertz: 60, extra: ["--vblank-sampling", "sparse"], logLevel: "warning")
            defer { daemon.stop() }
            let hardware = LinkRecorder()
            let plain = LinkRecorder()
            let hw = DisplayLink(socketPath: daemon.socketPath, handler: hardware.handler())
            let other = DisplayLink(socketPath: daemon.socketPath, handler: plain.handler())
            defer {
                hw.invalidate()
                other.invalidate()
            }
            #expect(!hw.hardwareTicks, "off by default")
            hw.hardwareTicks = true
            hw.start(on: DispatchQueue(label: "hardware"))
            other.start(on: DispatchQueue(label: "plain"))
            if case .subscribed(let id) = hw.withState({ $0.subscription }) {
                #expect(hw.connection.subscription(id)?.flags.contains(.hardwareTicks) == true)
            } else {
                Issue.record("a started link is subscribed")
            }
            func modelTimed(_ r: LinkRecorder, from start: Int) -> Int {
                r.all.dropFirst(start).filter { $0.frame.isModelTimed }.count
            }

            #expect(await eventually(timeout: 10) { plain.count >= 150 && hardware.count >= 150 })
            #expect(modelTimed(hardware, from: 0) == 0 && modelTimed(plain, from: 0) == 0)

            var h = hardware.count
            let p = plain.count
            hw.hardwareTicks = false
            #expect(!hw.hardwareTicks)
            #expect(await eventually(timeout: 8) { modelTimed(hardware, from: h) > 0 && modelTimed(plain, from: p) > 0 })

            // Frames of vblanks before the renewed subscription took effect may still be
            // model-timed: settle on the link's first one that is not, then count the frames of
            // later vblanks (each link's handler runs on its own queue, so by sequence, not order).
            h = hardware.count
            hw.hardwareTicks = true
            #expect(await eventually(timeout: 8) { hardware.all.dropFirst(h).contains { !$0.frame.isModelTimed } })
            let settled = hardware.all.dropFirst(h).first { !$0.frame.isModelTimed }?.frame.sequence ?? .max
            func after(_ r: LinkRecorder) -> [LinkSample] { r.all.filter { $0.frame.sequence > settled } }
            #expect(await eventually(timeout: 10) { after(plain).count >= 150 && after(hardware).count >= 150 })
            #expect(after(hardware).allSatisfy { !$0.frame.isModelTimed } && after(plain).allSatisfy { !$0.frame.isModelTimed })
        }
    }
}
