import Foundation
import Testing
import VsyncCore

/// Late frames' reasons through the real libvsync.so against the real vsyncd (timer source,
/// 60 Hz): Tests/libvsync/reasons-check.c overruns every fourth frame's work on purpose.
@Suite("libvsync late-frame reasons", .serialized)
struct LibvsyncReasonsTests {
    /// One "frame SEQ overran=0|1 in_time=0|1 skipped=N lag_ns=L reason=NAME" line of reasons-check.
    struct Verdict {
        var targetSequence: UInt64
        var overran: Bool
        var inTime: Bool
        var reason: String
    }

    static func verdicts(_ output: String) -> [Verdict] {
        output.split(separator: "\n").filter { $0.hasPrefix("frame ") }.compactMap { line in
            var fields: [String: String] = [:]
            for part in line.split(separator: " ").dropFirst(2) {
                let kv = part.split(separator: "=", maxSplits: 1)
                if kv.count == 2 { fields[String(kv[0])] = String(kv[1]) }
            }
            let parts = line.split(separator: " ")
            guard parts.count > 1, let sequence = UInt64(parts[1]), let overran = fields["overran"], let reason = fields["reason"]
            else { return nil }
            return Verdict(targetSequence: sequence, overran: overran == "1", inTime: fields["in_time"] == "1", reason: reason)
        }
    }

    /// "counts frames=F late=L NAME=N ...": the counts by name.
    static func counts(_ output: String) -> [String: Int] {
        guard let line = output.split(separator: "\n").first(where: { $0.hasPrefix("counts ") }) else { return [:] }
        var counts: [String: Int] = [:]
        for part in line.split(separator: " ").dropFirst() {
            let kv = part.split(separator: "=", maxSplits: 1)
            if kv.count == 2, let n = Int(kv[1]) { counts[String(kv[0])] = n }
        }
        return counts
    }

    /// The overrun frames' work lasts a period and 2 ms from receipt, longer than the period from
    /// their tick's vblank to their target, so they are the app's misses whatever the scheduler did.
    /// The others take no time: on time when their tick came in time (right after the last one,
    /// read by its target); when held back, the app's only after its own overrun. The counts are
    /// the per-frame verdicts'.
    @Test(.timeLimit(.minutes(1)))
    func overrunFramesAreAppDeadlineMissedAndTheOthersOnTime() throws {
        let daemon = try DaemonProcess(hertz: 60)
        defer { _ = daemon.stop() }
        let dir = try LibvsyncTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let check = dir.appendingPathComponent("reasons-check").path
        try LibvsyncTests.compile(LibvsyncTests.repository.appendingPathComponent("Tests/libvsync/reasons-check.c"), to: check)
        let result = try Command.run([check, daemon.socketPath, "40"])
        #expect(result.status == 0 && result.output.contains("done failures=0"), "\(result.output)")
        #expect(!result.output.contains("FAIL"), "\(result.output)")

        let verdicts = Self.verdicts(result.output)
        try #require(verdicts.count == 40, "\(result.output)")
        // Each judged frame is a different vblank's, in order.
        #expect(zip(verdicts, verdicts.dropFirst()).allSatisfy { $1.targetSequence > $0.targetSequence }, "\(result.output)")
        let missed = FrameJankReason.appDeadlineMissed.name
        let onTime = FrameJankReason.onTime.name
        #expect(verdicts.filter(\.overran).count == 10)
        let delivery = [FrameJankReason.deliveryLate.name, FrameJankReason.daemonLate.name]
        for (v, previous) in zip(verdicts, [nil] + verdicts.map(Optional.some)) {
            // A tick held back may still make its target (the rules count a frame owed from when
            // the app's previous frame ended); held back by the machine it is delivery's, and by
            // the app's own overrun just before it, the app's.
            let heldByApp = previous?.overran == true ? [missed] : []
            let expected = v.overran ? [missed] : v.inTime ? [onTime] : [onTime] + delivery + heldByApp
            #expect(expected.contains(v.reason), "frame for vblank \(v.targetSequence): \(result.output)")
        }
        // Not a test of nothing: most ticks come in time even on a busy machine.
        #expect(verdicts.filter { !$0.overran && $0.inTime }.count >= 20, "\(result.output)")

        let counts = Self.counts(result.output)
        #expect(counts["frames"] == verdicts.count, "\(result.output)")
        #expect(counts["late"] == verdicts.filter { $0.reason != onTime }.count, "\(result.output)")
        for reason in FrameJankReason.allCases {
            #expect(counts[reason.name] == verdicts.filter { $0.reason == reason.name }.count, "\(reason.name): \(result.output)")
        }
    }
}
