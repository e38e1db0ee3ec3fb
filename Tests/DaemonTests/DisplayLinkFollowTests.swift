@testable import DisplayLink
import Foundation
import Glibc
import Testing

/// `vsync-probe follow`, the shell's DisplayLink, against the REAL vsyncd; and no daemon at all.
extension DisplayLinkTests.Daemon {
    @Test func noDaemonFailsFastInTheLibraryAndInFollow() async throws {
        let path = NSTemporaryDirectory() + "/vsyncd-none-\(getpid()).sock"
        let recorder = LinkRecorder()
        let link = DisplayLink(socketPath: path, handler: recorder.handler())
        link.errorHandler = recorder.errorHandler()
        link.start(on: DispatchQueue(label: "none"))
        #expect(await eventually(timeout: 1) { recorder.errors.withLock { $0 == [.noDaemon(socketPath: path)] } })
        link.invalidate()

        let result = try runProbe(["follow", "--socket", path, "--frames", "3"], timeout: 5)
        #expect(result.status == 1)
        #expect(result.stdout.isEmpty)
        #expect(result.stderr == "vsync-probe: no vsyncd at \(path): start 'vsyncd --socket \(path)' or fix VSYNCD_SOCKET\n")
    }

    @Test func followPrintsJSONTicksAndASummary() async throws {
        let daemon = try DaemonProcess(hertz: 60, logLevel: "warning")
        defer { daemon.stop() }
        let result = try runProbe(["follow", "--socket", daemon.socketPath, "--fps", "30", "--frames", "20", "--json"], timeout: 10)
        #expect(result.status == 0, "stderr: \(result.stderr)")
        let objects = result.stdout.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
        #expect(objects.count == 21)
        let ticks = objects.dropLast()
        for tick in ticks {
            for key in ["seq", "timestamp", "targetTimestamp", "duration", "skipped", "flags", "latencyUs"] {
                #expect(tick[key] != nil, "missing \(key)")
            }
            #expect((tick["seq"] as? Int).map { $0 % 2 == 0 } == true)
            #expect((tick["flags"] as? [String]) == ["synthetic"])
            let interval = (tick["targetTimestamp"] as? Double ?? 0) - (tick["timestamp"] as? Double ?? 0)
            #expect(abs(interval - 2.0 / 60) < 1e-6)
        }
        // Protocol 4: every tick carries its display's generation; the timer display never changes.
        let generations = Set(ticks.compactMap { $0["generation"] as? Int })
        #expect(ticks.allSatisfy { $0["generation"] is Int } && generations.count == 1, "\(generations)")
        let summary = try #require(objects.last)
        #expect(summary["summary"] as? Bool == true)
        #expect(summary["ticks"] as? Int == 20)
        // Achieved: ticks delivered per second of vblank time. With the skipped ones added back
        // it is the 30 Hz the daemon offered (a busy machine may coalesce a few).
        let hz = summary["achievedHz"] as? Double ?? 0
        let skipped = summary["skipped"] as? Int ?? -1
        let seconds = summary["seconds"] as? Double ?? 0
        #expect(hz > 20 && hz < 30.01, "achieved \(hz) Hz")
        #expect(abs(Double(19 + skipped) / seconds - 30) < 0.5, "\(skipped) skipped over \(seconds) s")
        let latency = summary["latencyUs"] as? [String: Double]
        #expect(latency.map { $0["p50"]! <= $0["p99"]! && $0["p99"]! <= $0["max"]! } == true)
    }

    @Test func followStopsOnSIGINTWithASummary() async throws {
        let daemon = try DaemonProcess(hertz: 60, logLevel: "warning")
        defer { daemon.stop() }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try DaemonProcess.binary("vsync-probe"))
        process.arguments = ["follow", "--socket", daemon.socketPath]
        let out = Pipe()
        process.standardOutput = out
        try process.run()
        // SIGINT once it has printed 20 ticks (or after 5 s, which fails the count below).
        var head = ""
        let reader = out.fileHandleForReading
        let deadline = DisplayLink.currentTime() + 5
        while head.components(separatedBy: "\nseq ").count <= 20 && DisplayLink.currentTime() < deadline {
            let chunk = reader.availableData
            if chunk.isEmpty { break }
            head += String(decoding: chunk, as: UTF8.self)
        }
        kill(process.processIdentifier, SIGINT)
        let text = head + String(decoding: reader.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        let lines = text.split(separator: "\n")
        #expect(lines.filter { $0.hasPrefix("seq ") }.count >= 20)
        // "summary: N ticks over S s, achieved R Hz (…)": R is at most the display's 60 Hz, and near it
        // unless the machine is too busy to take every tick.
        let summary = lines.first { $0.hasPrefix("summary: ") }.map(String.init) ?? ""
        let achieved = summary.split(separator: " ").drop { $0 != "achieved" }.dropFirst().first.flatMap { Double($0) }
        #expect(achieved.map { $0 > 40 && $0 < 60.01 } == true, "summary: \(summary)")
        #expect(lines.contains { $0.hasPrefix("latency µs: p50 ") })
        #expect(lines.last?.hasPrefix("lead µs (target − receipt, work duration 0): p50 ") == true)
    }

    /// A follower waiting for a display that is not there (dark, unplugged) reads nothing, so
    /// only the signal can end its read: it must reach the thread that reads (before the
    /// fix it waited on after Ctrl-C, 8 runs of 8).
    @Test func followWaitingForItsDisplayStopsOnSIGINT() async throws {
        let daemon = try DaemonProcess(hertz: 60, logLevel: "warning")
        defer { daemon.stop() }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try DaemonProcess.binary("vsync-probe"))
        process.arguments = ["follow", "--socket", daemon.socketPath, "--display", "DP-9"]
        let out = Pipe()
        process.standardOutput = out
        try process.run()
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
        var head = ""
        let reader = out.fileHandleForReading
        while !head.contains("waiting for the display to appear") {
            let chunk = reader.availableData
            if chunk.isEmpty { break }
            head += String(decoding: chunk, as: UTF8.self)
        }
        try #require(head.contains("waiting for the display to appear"), "follow printed: \(head)")
        kill(process.processIdentifier, SIGINT)
        let deadline = DisplayLink.currentTime() + 5
        while process.isRunning && DisplayLink.currentTime() < deadline { usleep(10_000) }
        #expect(!process.isRunning, "follow still waits 5 s after SIGINT")
        guard !process.isRunning else { return }
        let text = head + String(decoding: reader.readDataToEndOfFile(), as: UTF8.self)
        #expect(process.terminationStatus == 0)
        #expect(text.contains("summary: no tick: still waiting for DP-9"), "follow printed: \(text)")
    }

    struct ProbeResult {
        var status: Int32
        var stdout: String
        var stderr: String
        var pid: Int32 = 0
    }

    func runProbe(_ arguments: [String], timeout: Double) throws -> ProbeResult {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try DaemonProcess.binary("vsync-probe"))
        process.arguments = arguments
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let killer = DispatchWorkItem { [process] in if process.isRunning { process.terminate() } }
        DispatchQueue.global().asyncAfter(deadline: .now() + timeout, execute: killer)
        let stdout = out.fileHandleForReading.readDataToEndOfFile()
        let stderr = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        killer.cancel()
        return ProbeResult(status: process.terminationStatus, stdout: String(decoding: stdout, as: UTF8.self),
                           stderr: String(decoding: stderr, as: UTF8.self), pid: process.processIdentifier)
    }
}
