import Foundation
import Testing
import VsyncCore

extension VsyncdTests {
    /// `--vblank-sampling sparse` on the timer source, whose vblank n is at epoch + n·period
    /// whether or not its events are on (its phase holds, as a real display's does): the ticks
    /// between bursts must continue the grid the real ones lie on, one per vblank.
    @Suite("vsyncd sparse vblank sampling") struct SparseSampling {
        static let period = 1e9 / 60

        /// Every tick's sequence above the last, with each gap counted in `skipped`.
        static func expectCounted(_ ticks: [Tick], _ sequence: (Tick) -> UInt64) {
            for (a, b) in zip(ticks, ticks.dropFirst()) {
                #expect(sequence(b) > sequence(a) && sequence(b) - sequence(a) - 1 == UInt64(b.skipped))
            }
        }

        @Test func modelTimedTicksBetweenBurstsLieOnTheGrid() throws {
            let daemon = try DaemonProcess(hertz: 60, extra: ["--vblank-sampling", "sparse"])
            let client = try RawClient(path: daemon.socketPath)
            try client.handshake(name: "sparse", version: 6)
            guard case .message(.timingPage) = client.receive() else { throw HarnessError("no TIMING_PAGE") }
            _ = try client.subscribe(1, fps: 0)
            var ticks: [Tick] = []
            while ticks.count < 300, let t = client.nextTick() { ticks.append(t) }  // 5 s at 60 Hz
            #expect(ticks.count == 300)
            let real = ticks.filter { !$0.flags.contains(.modelTimed) }
            let modelTimed = ticks.filter { $0.flags.contains(.modelTimed) }
            #expect(ticks.allSatisfy { !$0.flags.contains(.predicted) })  // the display is on
            // Continuous while the model learns, then bursts of three every 2 s: at least one
            // burst in 5 s, and far fewer real vblanks than ticks.
            #expect(real.count >= VBlankSampling.confidentSamples + VBlankSampling.burstLength)
            #expect(real.count <= VBlankSampling.confidentSamples + 4 * VBlankSampling.burstLength)
            #expect(modelTimed.count >= 200)
            print("sparse sampling, timer:60, 300 ticks: \(real.count) from vblank events, \(modelTimed.count) model-timed")
            // Each vblank ticked once, in order, every gap counted.
            Self.expectCounted(ticks) { $0.sequence }
            // Model-timed ticks on the line the real ones lie on (exact to the ns for the timer).
            guard let first = real.first else { return }
            for t in modelTimed {
                let grid = Double(first.timestampNs) + Double(t.sequence - first.sequence) * Self.period
                #expect(abs(Double(t.timestampNs) - grid) < 1_000, "tick \(t.sequence) off the grid by \(Double(t.timestampNs) - grid) ns")
                #expect(t.targetSequence == t.sequence + 1)
                #expect(abs(Double(t.targetTimestampNs) - grid - Self.period) < 1_000)
            }
        }

        @Test func pacedSubscriptionKeepsItsFramesBetweenBursts() throws {
            let daemon = try DaemonProcess(hertz: 60, extra: ["--vblank-sampling", "sparse"])
            let client = try RawClient(path: daemon.socketPath)
            try client.handshake(name: "paced", version: 4)
            _ = try client.subscribe(2, fps: 0)
            client.send(.setWorkDuration(SetWorkDuration(subscriptionID: 2, workDurationNs: 4_000_000)))
            var ticks: [Tick] = []
            while ticks.count < 240, let t = client.nextTick() { ticks.append(t) }  // 4 s
            #expect(ticks.count == 240)
            // Every frame aimed at once, in order, by either path; every gap counted.
            Self.expectCounted(ticks) { $0.targetSequence }
            // Protocol 4 knows no model-timed flag: those ticks say predicted.
            #expect(ticks.filter { $0.flags.contains(.predicted) }.count >= 150)
            #expect(ticks.allSatisfy { !$0.flags.contains(.modelTimed) })
            guard let anchor = ticks.first(where: { !$0.flags.contains(.predicted) }) else { return }
            for t in ticks {
                let grid = Double(anchor.timestampNs) + Double(t.targetSequence - anchor.sequence) * Self.period
                #expect(abs(Double(t.targetTimestampNs) - grid) < 1_000)
            }
        }
    

        @Test func hardwareTicksSubscriptionKeepsVBlankEventsOn() throws {
            let daemon = try DaemonProcess(hertz: 60, extra: ["--vblank-sampling", "sparse"])
            let client = try RawClient(path: daemon.socketPath)
            try client.handshake(name: "hardware", version: 6)
            guard case .message(.timingPage) = client.receive() else { throw HarnessError("no TIMING_PAGE") }
            _ = try client.subscribe(3, fps: 0, flags: .hardwareTicks)
            var ticks: [Tick] = []
            while ticks.count < 150, let t = client.nextTick() { ticks.append(t) }  // 2.5 s: past the learning
            #expect(ticks.count == 150)
            #expect(ticks.allSatisfy { $0.flags == .synthetic })
            Self.expectCounted(ticks) { $0.sequence }
        }
    }
}
