import Foundation
import TestSupport
import Testing

@testable import VsyncCore

/// The Perfetto writer: its protobuf encodings byte for byte, then a small trace decoded by
/// protoc (Debian's protobuf-compiler) against Perfetto's own definitions (Tests/Perfetto/protos,
/// vendored at the revision the encoder names), packet by packet, and its frame timeline
/// packets decoded raw, by field number.
@Suite("Perfetto trace")
struct PerfettoTraceTests {
    static let protos = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Perfetto/protos")

    // MARK: Protobuf encodings

    @Test func varintsAreBase128LeastSignificantGroupFirst() {
        func bytes(_ v: UInt64) -> [UInt8] {
            var w = ProtobufWriter()
            w.varint(v)
            return w.bytes
        }
        #expect(bytes(0) == [0x00])
        #expect(bytes(1) == [0x01])
        #expect(bytes(127) == [0x7F])
        #expect(bytes(128) == [0x80, 0x01])
        #expect(bytes(300) == [0xAC, 0x02])
        #expect(bytes(UInt64.max) == [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01])
        for v: UInt64 in [0, 127, 128, 16383, 16384, 1 << 35, UInt64.max] {
            #expect(ProtobufWriter.varintSize(v) == bytes(v).count)
        }
    }

    @Test func fieldsCarryTheirTagAndWireType() {
        var w = ProtobufWriter()
        w.uint64(1, 150)  // protobuf.dev's example: 08 96 01
        w.int32(2, -1)  // sign-extended: ten bytes
        w.bool(3, true)
        w.string(4, "é")  // UTF-8, length in bytes
        w.fixed64(5, 0x0102_0304_0506_0708)
        w.float(6, 1.5)
        w.uint32(76, 1)  // a two-byte tag: (76 << 3) | 0
        #expect(
            w.bytes == [
                0x08, 0x96, 0x01,
                0x10, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01,
                0x18, 0x01,
                0x22, 0x02, 0xC3, 0xA9,
                0x29, 0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01,
                0x35, 0x00, 0x00, 0xC0, 0x3F,
                0xE0, 0x04, 0x01,
            ])
    }

    @Test func nestedMessagesGetTheirLengthInFrontEvenPast127Bytes() {
        var w = ProtobufWriter()
        w.message(1) { m in
            m.message(2) { $0.uint64(3, 1) }
            m.bytes(4, [UInt8](repeating: 0xAA, count: 200))
        }
        // Outer: tag 0x0A, length 4 + 203 = 207 = CF 01; inner 12 02 18 01; bytes 22 C8 01 + 200.
        #expect(Array(w.bytes.prefix(10)) == [0x0A, 0xCF, 0x01, 0x12, 0x02, 0x18, 0x01, 0x22, 0xC8, 0x01])
        #expect(w.bytes.count == 3 + 207)
        let taken = w.take()
        #expect(taken.count == 210 && w.bytes.isEmpty, "take hands the bytes over and empties the writer")
    }

    // MARK: A trace, decoded by protoc

    /// One process, its link's thread, a vblank track with two
    /// vblanks (one predicted), an on-time and a late frame, a hang slice.
    static func sampleTrace() -> (bytes: [UInt8], tracks: [PerfettoTrace.Track]) {
        var t = PerfettoTrace(
            clocks: .init(monotonicNs: 1_000_000_000, boottimeNs: 1_500_000_000, realtimeNs: 1_800_000_000_000_000_000),
            sequenceID: 7, uuidSalt: 4242)
        var bytes = t.take()
        let process = t.process(pid: 4242, name: "demo")
        let thread = t.thread(pid: 4242, tid: 4243, name: "main")
        let vblanks = t.track(named: "VBlank DP-1", parent: process)
        t.vblank(on: vblanks, timestampNs: 1_016_666_667, sequence: 60)
        t.vblank(on: vblanks, timestampNs: 1_033_333_333, sequence: 61, predicted: true)
        t.surfaceFrame(
            .init(
                token: 61, displayFrameToken: 61, pid: 4242, layerName: "link 1",
                expectedStartNs: 1_016_666_667, expectedEndNs: 1_033_333_333,
                actualStartNs: 1_016_700_000, actualEndNs: 1_025_000_000,
                presentType: .onTime, onTimeFinish: true, jankType: .none, presentDelayMillis: 0.25))
        t.surfaceFrame(
            .init(
                token: 62, displayFrameToken: 62, pid: 4242, layerName: "link 1",
                expectedStartNs: 1_033_333_333, expectedEndNs: 1_050_000_000,
                actualStartNs: 1_033_400_000, actualEndNs: 1_060_000_000,
                presentType: .late, onTimeFinish: false, jankType: .appDeadlineMissed))
        t.slice(on: thread, name: "hang", startNs: 1_100_000_000, endNs: 1_400_000_000, arguments: [.string("stack", "#0 f")])
        bytes += t.take()
        return (bytes, [process, thread, vblanks])
    }

    @Test func decodesWithPerfettosDefinitionsPacketByPacket() throws {
        let (bytes, tracks) = Self.sampleTrace()
        let (process, thread, vblanks) = (tracks[0].uuid, tracks[1].uuid, tracks[2].uuid)
        #expect(Set([process, thread, vblanks]).count == 3, "each track its own uuid")
        let packets = try Self.packets(
            protoc(
                [
                    "--decode=perfetto.protos.Trace", "-I", Self.protos.path,
                    Self.protos.appendingPathComponent("frameworks_native_trace_packet.proto").path,
                ], bytes))
        let seq = "  trusted_packet_sequence_id: 7"
        let mono = ["  timestamp_clock_id: 3"]
        func at(_ ns: UInt64) -> String { "  timestamp: \(ns)" }
        func frameEnd(_ ns: UInt64, _ cookie: Int) -> [String] {
            [at(ns), seq] + mono + [
                "  [com.android.internal.FrameworksNativeTracePacket.frame_timeline_event] {", "    frame_end {", "      cookie: \(cookie)",
                "    }", "  }",
            ]
        }
        let expected: [[String]] = [
            [
                "  clock_snapshot {",
                "    clocks {", "      clock_id: 3", "      timestamp: 1000000000", "    }",
                "    clocks {", "      clock_id: 6", "      timestamp: 1500000000", "    }",
                "    clocks {", "      clock_id: 1", "      timestamp: 1800000000000000000", "    }",
                "    primary_trace_clock: BUILTIN_CLOCK_MONOTONIC", "  }", seq, "  sequence_flags: 1", "  first_packet_on_sequence: true",
            ],
            [
                seq, "  track_descriptor {", "    uuid: \(process)", "    process {", "      pid: 4242", "      process_name: \"demo\"",
                "    }", "  }",
            ],
            [
                seq, "  track_descriptor {", "    uuid: \(thread)", "    thread {", "      pid: 4242", "      tid: 4243",
                "      thread_name: \"main\"", "    }", "  }",
            ],
            [seq, "  track_descriptor {", "    uuid: \(vblanks)", "    name: \"VBlank DP-1\"", "    parent_uuid: \(process)", "  }"],
            [
                at(1_016_666_667), seq, "  track_event {", "    debug_annotations {", "      uint_value: 60", "      name: \"sequence\"",
                "    }",
                "    type: TYPE_INSTANT", "    track_uuid: \(vblanks)", "    name: \"vblank\"", "  }",
            ] + mono,
            [
                at(1_033_333_333), seq, "  track_event {", "    debug_annotations {", "      uint_value: 61", "      name: \"sequence\"",
                "    }",
                "    type: TYPE_INSTANT", "    track_uuid: \(vblanks)", "    name: \"vblank (predicted)\"", "  }",
            ] + mono,
            [at(1_016_666_667), seq] + mono + [
                "  [com.android.internal.FrameworksNativeTracePacket.frame_timeline_event] {", "    expected_surface_frame_start {",
                "      cookie: 1", "      token: 61", "      display_frame_token: 61", "      pid: 4242", "      layer_name: \"link 1\"",
                "    }", "  }",
            ],
            frameEnd(1_033_333_333, 1),
            [at(1_016_700_000), seq] + mono + [
                "  [com.android.internal.FrameworksNativeTracePacket.frame_timeline_event] {", "    actual_surface_frame_start {",
                "      cookie: 2", "      token: 61", "      display_frame_token: 61", "      pid: 4242", "      layer_name: \"link 1\"",
                "      present_type: PRESENT_ON_TIME", "      on_time_finish: true", "      gpu_composition: false", "      jank_type: 1",
                "      prediction_type: PREDICTION_VALID", "      present_delay_millis: 0.25", "    }", "  }",
            ],
            frameEnd(1_025_000_000, 2),
            [at(1_033_333_333), seq] + mono + [
                "  [com.android.internal.FrameworksNativeTracePacket.frame_timeline_event] {", "    expected_surface_frame_start {",
                "      cookie: 3", "      token: 62", "      display_frame_token: 62", "      pid: 4242", "      layer_name: \"link 1\"",
                "    }", "  }",
            ],
            frameEnd(1_050_000_000, 3),
            [at(1_033_400_000), seq] + mono + [
                "  [com.android.internal.FrameworksNativeTracePacket.frame_timeline_event] {", "    actual_surface_frame_start {",
                "      cookie: 4", "      token: 62", "      display_frame_token: 62", "      pid: 4242", "      layer_name: \"link 1\"",
                "      present_type: PRESENT_LATE", "      on_time_finish: false", "      gpu_composition: false", "      jank_type: 64",
                "      prediction_type: PREDICTION_VALID", "    }", "  }",
            ],
            frameEnd(1_060_000_000, 4),
            [
                at(1_100_000_000), seq, "  track_event {", "    debug_annotations {", "      string_value: \"#0 f\"",
                "      name: \"stack\"", "    }",
                "    type: TYPE_SLICE_BEGIN", "    track_uuid: \(thread)", "    name: \"hang\"", "  }",
            ] + mono,
            [at(1_400_000_000), seq, "  track_event {", "    type: TYPE_SLICE_END", "    track_uuid: \(thread)", "  }"] + mono,
        ]
        #expect(packets.count == expected.count)
        for (i, (got, want)) in zip(packets, expected).enumerated() {
            #expect(got == want, "packet \(i)")
        }
    }

    /// The frame timeline packets by field number alone (no .proto involved): TracePacket 76,
    /// FrameTimelineEvent 4 (ActualSurfaceFrameStart) with the fields the importer requires
    /// (cookie 1, token 2, display_frame_token 3, pid 4) and the verdict (6, 7, 9, 10).
    @Test func frameTimelineFieldNumbersDecodeRaw() throws {
        var t = PerfettoTrace(clocks: .init(monotonicNs: 5), sequenceID: 1)
        _ = t.take()
        t.surfaceFrame(
            .init(
                token: -3, displayFrameToken: 9, pid: 77, layerName: "L",
                expectedStartNs: 10, expectedEndNs: 20, actualStartNs: 11, actualEndNs: 25,
                presentType: .late, onTimeFinish: true, jankType: [.sfScheduling, .predictionError],
                predictionType: .expired))
        let packets = try Self.packets(protoc(["--decode_raw"], t.take()), opening: "1 {")
        #expect(packets.count == 4)
        #expect(
            packets[2] == [
                "  8: 11", "  58: 3", "  10: 1", "  76 {", "    4 {",
                "      1: 2", "      2: 18446744073709551613", "      3: 9", "      4: 77", "      5: \"L\"",
                "      6: 2", "      7: 1", "      8: 0", "      9: 6", "      10: 2", "    }", "  }",
            ])
        #expect(packets[3] == ["  8: 25", "  58: 3", "  10: 1", "  76 {", "    5 {", "      1: 2", "    }", "  }"])
    }

    /// A slice begun before its end is known (a hang, written while it lasts): the begin with
    /// its arguments, then the end with arguments of its own (the trace processor adds them to
    /// the slice's), here a double.
    @Test func aSliceBegunBeforeItsEndIsKnownEndsLaterWithArguments() throws {
        var t = PerfettoTrace(clocks: .init(monotonicNs: 5), sequenceID: 3)
        let track = t.track(named: "hangs main")
        _ = t.take()
        t.begin(on: track, name: "hang", atNs: 100, arguments: [.string("stack", "#0 f")])
        let begun = t.take()
        t.end(on: track, atNs: 350, arguments: [.double("duration_ms", 0.25)])
        let packets = try Self.packets(
            protoc(
                [
                    "--decode=perfetto.protos.Trace", "-I", Self.protos.path,
                    Self.protos.appendingPathComponent("frameworks_native_trace_packet.proto").path,
                ], begun + t.take()))
        let seq = "  trusted_packet_sequence_id: 3"
        #expect(
            packets == [
                [
                    "  timestamp: 100", seq, "  track_event {", "    debug_annotations {", "      string_value: \"#0 f\"",
                    "      name: \"stack\"", "    }", "    type: TYPE_SLICE_BEGIN", "    track_uuid: \(track.uuid)", "    name: \"hang\"",
                    "  }", "  timestamp_clock_id: 3",
                ],
                [
                    "  timestamp: 350", seq, "  track_event {", "    debug_annotations {", "      double_value: 0.25",
                    "      name: \"duration_ms\"", "    }", "    type: TYPE_SLICE_END", "    track_uuid: \(track.uuid)", "  }",
                    "  timestamp_clock_id: 3",
                ],
            ], "\(packets)")
    }

    @Test func anEmptyTakeAfterTheSnapshotAndBytesOnlyOnce() {
        var t = PerfettoTrace(clocks: .init(monotonicNs: 1))
        let first = t.take()
        #expect(!first.isEmpty && t.pendingBytes.isEmpty && t.take().isEmpty)
        #expect(t.sequenceID == 1)
    }

    // MARK: protoc

    /// Runs protoc with the trace on its standard input; its text output.
    func protoc(_ arguments: [String], _ input: [UInt8]) throws -> String { try Protoc.run(arguments, input: input) }

    /// The top-level `packet { … }` blocks of protoc's text, each as its inner lines.
    static func packets(_ text: String, opening: String = "packet {") -> [[String]] { Protoc.packets(text, opening: opening) }
}
