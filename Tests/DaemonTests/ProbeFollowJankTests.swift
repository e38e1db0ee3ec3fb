import Foundation
import Glibc
import TestSupport
import Testing

@testable import DisplayLink

/// `vsync-probe follow`'s reason per tick and its Perfetto trace, against the real vsyncd on
/// its timer source.
extension DisplayLinkTests.Daemon {
    /// Each tick's JSON line, parsed.
    static func tickObjects(_ stdout: String) -> [[String: Any]] {
        stdout.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            .filter { $0["seq"] != nil }
    }

    static func uint(_ object: [String: Any], _ key: String) -> UInt64 { (object[key] as? NSNumber)?.uint64Value ?? 0 }

    /// Every tick carries a reason; the trace decodes packet by packet: the clock snapshot,
    /// the process and its vblank track, then per tick its vblank and its frame's four
    /// FrameTimeline packets with the tick's own numbers.
    @Test func followWritesAReasonPerTickAndAPerfettoTrace() async throws {
        let daemon = try DaemonProcess(hertz: 60, logLevel: "warning")
        defer { daemon.stop() }
        let file = daemon.directory.appendingPathComponent("follow.pftrace").path
        let result = try runProbe(
            ["follow", "--socket", daemon.socketPath, "--frames", "6", "--json", "--trace-out", file], timeout: 10)
        #expect(result.status == 0, "stderr: \(result.stderr)")
        let ticks = Self.tickObjects(result.stdout)
        try #require(ticks.count == 6)
        let names = Set(FrameJankReason.allCases.map(\.name))
        #expect(ticks.allSatisfy { names.contains($0["reason"] as? String ?? "") }, "\(ticks.map { $0["reason"] ?? "none" })")
        let summary = try #require(
            result.stdout.split(separator: "\n").last.flatMap { try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] })
        let late = try #require(summary["late"] as? [String: Int])
        #expect(late.values.reduce(0, +) == ticks.filter { $0["reason"] as? String != "onTime" }.count)

        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: file)))
        let packets = try Protoc.packets(Protoc.run(["--decode_raw"], input: bytes), opening: "1 {")
        try #require(packets.count == 3 + 6 * 5, "\(packets.count) packets")
        #expect(packets[0].contains("  6 {"))  // clock_snapshot
        #expect(packets[0].contains("    2: 3"))  // primary_trace_clock: CLOCK_MONOTONIC
        #expect(packets[1].contains("  60 {") && packets[1].contains("      1: \(result.pid)"))  // process descriptor: pid
        #expect(packets[2].contains("    2: \"vblank primary\""))  // the vblank track's name
        for (i, tick) in ticks.enumerated() {
            let p = Array(packets[(3 + i * 5)...].prefix(5))
            let vblank = Self.uint(tick, "timestampNs")
            let target = Self.uint(tick, "targetTimestampNs")
            // The tick's vblank: a track event (11) at its time.
            #expect(p[0].first == "  8: \(vblank)" && p[0].contains("  11 {"), "\(p[0])")
            // Expected start (76.3): cookie, token counting from 1, display frame token = the
            // target's sequence, the probe's pid; at the tick's due time, its vblank.
            let expected = [
                "  76 {", "    3 {", "      2: \(i + 1)", "      3: \(Self.uint(tick, "targetSequence"))", "      4: \(result.pid)",
            ]
            #expect(expected.allSatisfy(p[1].contains), "\(p[1])")
            #expect(p[2].contains("    5 {"))  // its FrameEnd
            #expect(p[3].contains("    4 {") && p[3].contains("      2: \(i + 1)"))  // actual start
            #expect(p[4].contains("    5 {"))
            // Times of a tick judged on its own frame (none held back before it).
            if Self.uint(tick, "skipped") == 0 || i == 0 {
                #expect(p[1].first == "  8: \(vblank)", "\(p[1])")
                #expect(p[2].first == "  8: \(target)", "\(p[2])")
            }
            // The actual frame begins and ends when the probe read the tick.
            let received = Double(vblank) + (tick["latencyUs"] as? Double ?? 0) * 1000
            let actual = p[3].first.flatMap { Double($0.dropFirst("  8: ".count)) } ?? 0
            #expect(abs(actual - received) < 200, "actual start \(actual), received \(received)")
            // The reason's jank bits (field 9) on the actual start.
            let reason = FrameJankReason.allCases.first { $0.name == tick["reason"] as? String }
            #expect(reason.map { p[3].contains("      9: \($0.perfettoJankType.rawValue)") } == true, "\(p[3])")
        }
    }

    @Test func anUnwritableTraceFileFailsInOneLine() async throws {
        let daemon = try DaemonProcess(hertz: 60, logLevel: "warning")
        defer { daemon.stop() }
        let file = daemon.directory.appendingPathComponent("missing/follow.pftrace").path
        let result = try runProbe(["follow", "--socket", daemon.socketPath, "--frames", "3", "--trace-out", file], timeout: 10)
        #expect(result.status == 1)
        #expect(result.stdout.isEmpty)
        #expect(
            result.stderr == "vsync-probe: cannot write the trace to \(file): No such file or directory; give a writable --trace-out path\n"
        )
    }

    /// vsyncd stopped (SIGSTOP) for 50 ms: the tick that reaches the follower after it judges
    /// the frame it was owed as delivered late.
    @Test func aStoppedDaemonsHeldTicksAreDeliveryLate() async throws {
        let daemon = try DaemonProcess(hertz: 60, logLevel: "warning")
        defer { daemon.stop() }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try DaemonProcess.binary("vsync-probe"))
        process.arguments = ["follow", "--socket", daemon.socketPath, "--json", "--frames", "40"]
        let out = Pipe()
        process.standardOutput = out
        try process.run()
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
        var text = ""
        let reader = out.fileHandleForReading
        while Self.tickObjects(text).count < 10 {
            let chunk = reader.availableData
            if chunk.isEmpty { break }
            text += String(decoding: chunk, as: UTF8.self)
        }
        try #require(Self.tickObjects(text).count >= 10, "follow printed: \(text)")
        let stoppedNs = monotonicNowNs()
        kill(daemon.pid, SIGSTOP)
        usleep(50_000)  // the fault itself: how long vsyncd stays stopped
        let continuedNs = monotonicNowNs()
        kill(daemon.pid, SIGCONT)
        text += String(decoding: reader.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        let ticks = Self.tickObjects(text)
        // The first tick read after the daemon went on: stopped 50 ms, at least two vblanks
        // were held back from a follower that waited for them.
        let received = { (t: [String: Any]) in Double(Self.uint(t, "timestampNs")) + (t["latencyUs"] as? Double ?? 0) * 1000 }
        let after = try #require(ticks.first { received($0) >= Double(continuedNs) }, "no tick after the stop: \(text)")
        #expect(Self.uint(after, "skipped") >= 2, "\(after)")
        #expect(after["reason"] as? String == "deliveryLate", "stopped at \(stoppedNs), went on at \(continuedNs): \(after)")
    }
}
