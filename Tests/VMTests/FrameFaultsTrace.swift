import Foundation
import TestSupport
import Testing
import VsyncCore

/// The app's Perfetto trace from FrameFaultsVMTests, decoded by protoc with Perfetto's
/// definitions (Tests/Perfetto/protos) and checked packet by packet against what the app printed.
extension FrameFaultsVMTests {
    /// One decoded packet: its lines, and the fields these checks read.
    struct Packet {
        let lines: [String]
        /// The value of `key` nearest the packet's top (`key: value`, unquoted): an event's
        /// `name`, not its arguments'.
        func value(_ key: String) -> String? {
            var best: (indent: Int, value: String)?
            for line in lines {
                let trimmed = line.drop { $0 == " " }
                let indent = line.count - trimmed.count
                guard trimmed.hasPrefix(key + ": "), indent < best?.indent ?? .max else { continue }
                let v = trimmed.dropFirst(key.count + 2)
                best = (indent, v.hasPrefix("\"") && v.hasSuffix("\"") && v.count >= 2 ? String(v.dropFirst().dropLast()) : String(v))
            }
            return best?.value
        }
        func has(_ line: String) -> Bool { lines.contains { $0.drop { $0 == " " } == line } }
        var text: String { lines.map { $0.count > 200 ? $0.prefix(200) + "…" : $0 }.joined(separator: "\n") }
    }

    static func checkTrace(_ bytes: [UInt8], report: AppReport, faults: [(String, UInt64, FrameJankReason)]) throws {
        // Whole: protoc fails on a packet it cannot decode. And every packet a TracePacket of
        // Perfetto's: as many as the raw decode (by field number alone) finds.
        let packets = Protoc.packets(try Protoc.run(Protoc.perfettoTraceArguments, input: bytes)).map(Packet.init)
        let raw = Protoc.packets(try Protoc.run(["--decode_raw"], input: bytes), opening: "1 {")
        #expect(packets.count == raw.count && !packets.isEmpty, "\(packets.count) packets decoded, \(raw.count) in the file")

        // Every frame the app began is an actual surface frame, its token counting from 1, for
        // its target vblank, with the jank type of the reason the app was told (none if on time).
        // The last one may have begun as the app stopped, before it was written.
        let actual = packets.filter { $0.has("actual_surface_frame_start {") }
        let expected = packets.filter { $0.has("expected_surface_frame_start {") }
        #expect(actual.count >= report.frames.count - 1 && actual.count <= report.frames.count,
                "\(actual.count) actual frames in the trace, \(report.frames.count) begun")
        #expect(expected.count == actual.count, "\(expected.count) expected frames, \(actual.count) actual")
        var reasons = Dictionary(grouping: report.late, by: \.target).mapValues { $0.map(\.reason) }
        var wrong: [String] = []
        for (i, (frame, packet)) in zip(report.frames, actual).enumerated() {
            let reason = reasons[frame.target]?.first ?? "onTime"
            if reasons[frame.target]?.isEmpty == false { reasons[frame.target]?.removeFirst() }
            let jank = FrameJankReason.allCases.first { $0.name == reason }?.perfettoJankType.rawValue
            let got = (packet.value("token"), packet.value("display_frame_token"), packet.value("jank_type"))
            if got != ("\(i + 1)", "\(frame.target)", jank.map(String.init)) {
                wrong.append("frame \(i + 1) for vblank \(frame.target) (\(reason)): token \(got.0 ?? "-"), display frame \(got.1 ?? "-"), jank \(got.2 ?? "-")")
            }
        }
        #expect(wrong.isEmpty, "\(wrong.count) frames not as the app saw them: \(wrong.prefix(5))")
        // Each frame's expected and actual start closed by one frame_end of its cookie.
        let cookies = packets.compactMap { $0.has("frame_end {") ? $0.value("cookie") : nil }
        let started = (expected + actual).compactMap { $0.value("cookie") }
        #expect(cookies.sorted() == started.sorted(), "\(started.count) frame starts, \(cookies.count) frame ends; unmatched: \(Set(started).symmetricDifference(cookies).prefix(5))")
        // And each frame's newest vblank, once, as an instant on the vblank track.
        let vblanks = packets.filter { $0.value("type") == "TYPE_INSTANT" && $0.value("name") == "vblank" }.compactMap { $0.value("uint_value") }
        let written = Set(report.frames.prefix(actual.count).map { "\($0.sequence)" })
        #expect(Set(vblanks) == written && vblanks.count == written.count, "vblanks in the trace: \(vblanks.count), the app's frames': \(written.count)")
        print("frame faults trace: \(packets.count) packets, \(actual.count) actual and \(expected.count) expected frames, \(vblanks.count) vblanks")

        // Each fault's frame as ui.perfetto.dev gets it: printed, one of each kind.
        for (fault, target, reason) in faults {
            let frame = try #require(actual.first { $0.value("display_frame_token") == "\(target)" }, "no actual frame for vblank \(target)")
            #expect(frame.value("jank_type") == "\(reason.perfettoJankType.rawValue)", "\(fault): \(frame.text)")
            print("frame faults trace, \(fault) (\(reason.name)):\n" + frame.text)
        }

        // The hang: a slice begun on the track `hangs drawing` in the app's group, its stack naming
        // the function, stamped from the hang's start, and ended after the hung frame. (Whether
        // its begin is written while the hang lasts is the guest's speed: see the report.)
        let track = try #require(
            packets.first { $0.has("track_descriptor {") && $0.value("name") == "hangs drawing" }?.value("uuid"), "no track \"hangs drawing\"")
        let onTrack = packets.indices.filter { packets[$0].value("track_uuid") == track }
        let beginAt = try #require(
            onTrack.first { packets[$0].value("type") == "TYPE_SLICE_BEGIN" && packets[$0].lines.contains { $0.contains("simulatedHangInKnownFunction") } },
            "no hang slice naming the function on \"hangs drawing\": \(onTrack.count) events there")
        let begin = packets[beginAt]
        #expect(begin.value("name") == "hang", "\(begin.text)")
        let endAt = try #require(
            packets[beginAt...].firstIndex { $0.value("track_uuid") == track && $0.value("type") == "TYPE_SLICE_END" }, "the hang slice never ends")
        let returned = try #require(report.lines.first { $0.hasPrefix("hang returned") }.map(AppReport.fields))
        let (start, end) = (UInt64(returned["start"] ?? ""), UInt64(returned["end"] ?? ""))
        let (sliceStart, sliceEnd) = (begin.value("timestamp").flatMap(UInt64.init), packets[endAt].value("timestamp").flatMap(UInt64.init))
        #expect(sliceStart != nil && start != nil && sliceStart! <= start!, "slice from \(sliceStart ?? 0), the hung function from \(start ?? 0)")
        #expect(sliceEnd != nil && end != nil && sliceEnd! >= end!, "slice to \(sliceEnd ?? 0), the hung function to \(end ?? 0)")
        let hungTarget = faults[2].1
        let hungFrameAt = try #require(packets.firstIndex { $0.has("actual_surface_frame_start {") && $0.value("display_frame_token") == "\(hungTarget)" })
        // The frame is written as its callback returns, before the detector sees the context move.
        #expect(hungFrameAt < endAt, "the slice's begin at packet \(beginAt), the hung frame's at \(hungFrameAt), the end at \(endAt)")
        print("frame faults trace, the hang's slice begin (packet \(beginAt); its frame at \(hungFrameAt), the end at \(endAt)):\n" + begin.text)
    }
}
