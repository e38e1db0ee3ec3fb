import Foundation
import Testing

/// `vsync-probe follow --json` under variable refresh: the VRR toggle trace replayed through the
/// real vsyncd, followed by the real probe (protocol 5's face in the shell).
extension DisplayLinkTests.Daemon {
    @Test func followPrintsVariableRefreshEventsWithTheirClockPairAndFlagsTicks() async throws {
        let trace = ReplayTraceTests.traces.appendingPathComponent("vrr-toggle.trace").path
        let daemon = try DaemonProcess(extra: ["--source", "replay:\(trace)@2"])
        defer { daemon.stop() }
        // The trace's 700 vblanks last 3 s at twice the speed; its 4 toggles are past vblank 540.
        let result = try runProbe(["follow", "--socket", daemon.socketPath, "--frames", "600", "--json"], timeout: 15)
        #expect(result.status == 0, "stderr: \(result.stderr)")
        let objects = result.stdout.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
        let events = objects.filter { $0["event"] as? String == "variableRefreshChanged" }
        #expect(events.map { $0["variable"] as? Bool } == [true, false, true, false], "\(events)")
        for e in events {
            // The trace's 48-144 Hz range, replayed at 2×: 96-288 Hz.
            #expect(e["minIntervalNs"] as? Int == 3_472_222 && e["maxIntervalNs"] as? Int == 10_416_667, "\(e)")
            let mono = e["monotonicNs"] as? Int ?? 0, real = e["realtimeNs"] as? Int ?? 0
            #expect(mono > 0 && real > mono, "the event's clock pair: \(e)")
        }
        #expect(!objects.contains { $0["event"] as? String == "modeChanged" })
        // Each toggle is one generation, and every tick of a generation whose event said "on"
        // is flagged variable, every other one not. (By generation, not by line order: the
        // client keeps the newest tick of a read, so a tick read with an event may print after it.)
        var variableAt: [Int: Bool] = [:]
        for e in events { if let g = e["generation"] as? Int { variableAt[g] = e["variable"] as? Bool } }
        #expect(variableAt.count == 4, "\(events)")
        var variableTicks = 0
        for o in objects where o["event"] == nil {
            guard let flags = o["flags"] as? [String], let g = o["generation"] as? Int else { continue }
            let on = variableAt[g] ?? false
            #expect(flags.contains("variable") == on, "\(o)")
            if on { variableTicks += 1 }
        }
        #expect(variableTicks >= 100)
    }
}
