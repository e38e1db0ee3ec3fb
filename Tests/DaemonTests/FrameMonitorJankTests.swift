import Foundation
import Glibc
import Synchronization
import TestSupport
import Testing

@testable import DisplayLink

/// FrameMonitor's late frames by reason and its Perfetto trace, with faults injected, against
/// the real vsyncd on its timer source.
extension DisplayLinkTests.Library {
    /// An app that sleeps past its frame's target once: that frame is the app's missed
    /// deadline, in the monitor's counts and in its trace, where the frame's FrameTimeline
    /// actual start carries the jank type App Deadline Missed.
    @Test func anAppSleepingPastItsTargetMissedItsDeadline() async throws {
        let daemon = try Self.daemon()
        defer { daemon.stop() }
        let calls = Atomic<Int>(0)
        let monitor = FrameMonitor(
            socketPath: daemon.socketPath,
            work: { link in
                // The 20th frame sleeps until 10 ms past its target vblank.
                guard calls.add(1, ordering: .relaxed).newValue == 20, let frame = link.currentFrame else { return }
                let now = MonotonicClock.nanoseconds()
                let until = frame.targetTimestampNanoseconds + 10_000_000
                if until > now { usleep(UInt32((until - now) / 1000)) }
            },
            onReport: { _ in })
        let file = daemon.directory.appendingPathComponent("monitor.pftrace").path
        try monitor.recordTrace(to: file)
        monitor.start(on: DispatchQueue(label: "monitor"))
        #expect(await eventually(timeout: 5) { calls.load(ordering: .relaxed) >= 40 })
        monitor.invalidate()
        let totals = monitor.totals
        #expect(totals.lateFrames[.appDeadlineMissed, default: 0] >= 1, "\(totals)")
        #expect(totals.late == totals.lateFrames.values.reduce(0, +))
        #expect(totals.lateFrames[.onTime] == nil)

        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: file)))
        let packets = Protoc.packets(try Protoc.run(["--decode_raw"], input: bytes), opening: "1 {")
        // The actual surface frame starts (76.4), by token (field 2).
        let actual = packets.filter { $0.contains("    4 {") && $0.contains("  76 {") }
        #expect(actual.count >= 40)
        let twentieth = try #require(actual.first { $0.contains("      2: 20") }, "no frame with token 20")
        let appDeadline = FrameJankReason.appDeadlineMissed.perfettoJankType.rawValue
        #expect(twentieth.contains("      9: \(appDeadline)"), "\(twentieth)")
        #expect(twentieth.contains("      7: 0"), "on_time_finish: \(twentieth)")
    }
}
