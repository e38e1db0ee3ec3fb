import Testing
import VsyncCore

@testable import DisplayLink

/// How a link's hangs are written into its trace (`HangSlices`), from made-up hangs: the
/// cases a live detector rarely gives (a trace opened mid-hang, a watch dropped mid-hang, a
/// deep stack), decoded by protoc with Perfetto's definitions.
@Suite struct HangSlicesTests {
    typealias Packet = HangDetectorTests.TracePacket

    static func hang(id: UInt64, since: UInt64, frames: Int = 2) -> HangDetector.Hang {
        let stack = HangStack(
            frames: (0..<frames).map { HangStack.Frame(address: UInt(0x1000 + $0), symbol: "f\($0)()", offset: 4, module: "/usr/bin/app") },
            threadID: 77)
        return HangDetector.Hang(
            id: id, context: "main", kind: .running, sinceNanoseconds: since, detectedNanoseconds: since + 300_000_000,
            stack: stack, stackUnavailable: nil)
    }

    /// Writes `events` into a new trace; the events on the hang track, after checking that the
    /// track is the process's `hangs main`.
    static func write(_ events: [HangDetector.Event]) throws -> [Packet] {
        var trace = PerfettoTrace(clocks: .init(monotonicNs: 1))
        let process = trace.process(pid: 4242, name: "app")
        var slices = HangSlices()
        for event in events { slices.record(event, process: process, into: &trace) }
        let packets = try HangDetectorTests.decodeTrace(bytes: trace.take())
        let tracks = packets.compactMap(\.descriptor).filter { $0.name == "hangs main" }
        #expect(tracks.count == 1 && tracks.first?.parent == process.uuid, "\(tracks)")
        let track = try #require(tracks.first?.uuid)
        return packets.filter { $0.event?.track == track }
    }

    static func kind(_ p: Packet) -> String { p.event?.type ?? "" }

    @Test func aHangThatBeganBeforeTheTraceIsWrittenWholeWhenItEnds() throws {
        let packets = try Self.write([.ended(Self.hang(id: 1, since: 1_000_000_000), durationNanoseconds: 400_000_000)])
        #expect(packets.map(Self.kind) == ["TYPE_SLICE_BEGIN", "TYPE_SLICE_END"], "\(packets)")
        guard packets.count == 2 else { return }
        #expect(packets[0].timestamp == 1_000_000_000 && packets[1].timestamp == 1_400_000_000)
        #expect(packets[0].event?.name == "hang")
        #expect(packets[0].annotations["duration_ms"].flatMap(Double.init) == 400)
        #expect(packets[0].annotations["stack"] == "#0 f0() + 4 (app)\\n#1 f1() + 4 (app)", "\(packets[0].annotations)")
        #expect(packets[0].annotations["thread_id"] == "77")
        #expect(packets[0].annotations["kind"]?.hasPrefix("running") == true)
    }

    @Test func aHangWhoseEndWasNeverSeenEndsWhereTheNextBegins() throws {
        // The link stopped watching while the first hung, then watched again: slices on a
        // track nest, so the first must end before the second begins.
        let second = Self.hang(id: 1, since: 2_000_000_000)
        let packets = try Self.write([
            .began(Self.hang(id: 1, since: 1_000_000_000)), .began(second), .ended(second, durationNanoseconds: 500_000_000),
        ])
        #expect(packets.map(Self.kind) == ["TYPE_SLICE_BEGIN", "TYPE_SLICE_END", "TYPE_SLICE_BEGIN", "TYPE_SLICE_END"], "\(packets)")
        guard packets.count == 4 else { return }
        #expect(packets.map(\.timestamp) == [1_000_000_000, 2_000_000_000, 2_000_000_000, 2_500_000_000])
        #expect(packets[1].annotations["end"]?.hasPrefix("not seen") == true, "\(packets[1].annotations)")
        #expect(packets[2].annotations["duration_ms"] == nil, "the length is known only at the end")
        #expect(packets[3].annotations["duration_ms"].flatMap(Double.init) == 500)
    }

    @Test func aDeepStackKeepsItsSixteenInnermostFrames() throws {
        let packets = try Self.write([.began(Self.hang(id: 1, since: 1_000_000_000, frames: 40))])
        #expect(packets.map(Self.kind) == ["TYPE_SLICE_BEGIN"])
        let stack = try #require(packets.first?.annotations["stack"])
        #expect(stack.hasPrefix("#0 f0() + 4 (app)\\n") && stack.contains("\\n#15 f15() + 4 (app)\\n"), "\(stack)")
        #expect(!stack.contains("#16 ") && stack.hasSuffix(" 24 more frames"), "\(stack)")
    }
}
