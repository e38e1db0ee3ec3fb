import Foundation
import Testing
@testable import VsyncCore

/// `vsync-probe record --trace-out`: the corpus as Chrome trace-event JSON loads as JSON with
/// the fields Perfetto reads, its events in time order.
@Suite("Trace-event JSON")
struct TraceEventJSONTests {
    static let traces = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Traces")

    @Test(arguments: ["vkms-60hz.trace", "mode-change.trace", "missed-vblanks.trace", "vrr-toggle.trace"])
    func loadsAsTraceEventJSONInOrder(name: String) throws {
        let trace = try VBlankTrace(parsing: String(contentsOf: Self.traces.appendingPathComponent(name), encoding: .utf8))
        let json = TraceEventJSON.encode(trace)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
        let events = try #require(object["traceEvents"] as? [[String: Any]])
        let timed = events.filter { $0["ph"] as? String != "M" }
        // Metadata names each display's track first.
        #expect(events.prefix(trace.displays.count).allSatisfy { $0["ph"] as? String == "M" && $0["name"] as? String == "process_name" })
        let times = try timed.map { try #require($0["ts"] as? Double) }
        #expect(zip(times, times.dropFirst()).allSatisfy { $0 <= $1 }, "events out of order")
        // One frame slice per pair of consecutive vblanks, lasting until the next one (a vblank
        // the kernel delivered twice, as vkms-60hz.trace's 481, opens no slice of its own).
        var vblanks: [(UInt64, UInt64)] = []
        for case let .vblank(_, s, t) in trace.events where vblanks.last.map({ s > $0.0 }) ?? true { vblanks.append((s, t)) }
        let frames = timed.filter { $0["ph"] as? String == "X" }
        #expect(frames.count == vblanks.count - 1)
        for (frame, (a, b)) in zip(frames, zip(vblanks, vblanks.dropFirst())) {
            #expect(frame["name"] as? String == "frame \(a.0)")
            let dur = try #require(frame["dur"] as? Double)
            #expect(abs(dur * 1000 - Double(b.1 - a.1)) < 1)
            let missed = (frame["args"] as? [String: Any])?["missedAfter"] as? Int
            #expect(missed == Int(b.0 - a.0 - 1))
        }
        // Instants: each mode line, and each VRR_ENABLED line (variable refresh turned on or off).
        let instants = timed.filter { $0["ph"] as? String == "i" }.compactMap { $0["name"] as? String }
        #expect(instants.filter { $0.hasPrefix("mode ") }.count == trace.events.filter { if case .mode = $0 { true } else { false } }.count)
        let toggles = trace.events.compactMap { if case .variableRefreshEnabled(_, _, let on) = $0 { "variable refresh \(on ? "on" : "off")" } else { nil } }
        #expect(instants.filter { $0.hasPrefix("variable refresh") } == toggles)
    }

    @Test func microsecondsAreExactAndNamesEscaped() {
        #expect(TraceEventJSON.micros(3_693_998_065) == "3693998.065")
        #expect(TraceEventJSON.micros(1_000_000_000_000_000_007) == "1000000000000000.007")
        #expect(TraceEventJSON.escape("a\"b\\c\n") == #"a\"b\\c\u000a"#)
    }
}
