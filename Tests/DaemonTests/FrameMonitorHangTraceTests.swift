import Dispatch
import Foundation
import Glibc
import Synchronization
import TestSupport
import Testing

@testable import DisplayLink

/// A FrameMonitor's Perfetto trace with its link's hang detector on, against the real vsyncd
/// on its timer source: the monitor's work hangs on purpose in a known function, and the trace,
/// decoded by protoc with Perfetto's definitions, has the hang as a slice on a track of its own,
/// written while the hang lasted and ended with the length the detector reported.
extension HangDetectorTests {
    @Test func aHangIsASliceOnItsOwnTrackInTheMonitorsTrace() throws {
        let daemon = try DaemonProcess(hertz: 60, logLevel: "warning")
        defer { daemon.stop() }
        let log = Log()
        // When the app's handler heard of each hang's end, by hang.
        let endSeen = Mutex<[UInt64: UInt64]>([:])
        let detector = try HangDetector(configuration: Self.configuration) { event in
            if case .ended(let hang, _) = event { endSeen.withLock { $0[hang.id] = MonotonicClock.nanoseconds() } }
            log.handler(event)
        }
        defer { detector.stop() }
        let calls = Atomic<Int>(0)
        let monitor = FrameMonitor(
            socketPath: daemon.socketPath,
            work: { _ in
                guard calls.add(1, ordering: .relaxed).newValue == 10 else { return }
                let (start, end) = simulatedHangInKnownFunction(milliseconds: Self.hangMs)
                log.append(.hangReturned(startNs: start, endNs: end))
            },
            onReport: { _ in })
        let file = daemon.directory.appendingPathComponent("hang.pftrace").path
        try monitor.recordTrace(to: file)
        monitor.start(on: DispatchQueue(label: "drawing"))
        monitor.link.detectHangs(with: detector, name: "drawing")
        defer { monitor.invalidate() }

        let hang = try #require(
            log.waitForBegan { $0.stack?.contains(function: "simulatedHangInKnownFunction") == true }, "no hang named the function")
        let duration = try #require(log.waitForEnded(of: hang.id), "the hang never ended in the detector's eyes")
        let seen = try #require(endSeen.withLock { $0[hang.id] })
        let returned = try #require(
            log.entries.withLock { $0 }.lazy.compactMap { e -> (UInt64, UInt64)? in
                if case .hangReturned(let s, let e) = e { (s, e) } else { nil }
            }.first)
        // The trace is written before the handler is told: read it now, the link still running.
        let packets = try Self.decodeTrace(file)
        let track = try Self.hangTrack("drawing", in: packets)
        let onTrack = packets.filter { $0.event?.track == track }
        let beginAt = try #require(
            onTrack.firstIndex { $0.event?.type == "TYPE_SLICE_BEGIN" && $0.timestamp == hang.sinceNanoseconds },
            "no begin at the hang's start \(hang.sinceNanoseconds): \(onTrack)")
        let begin = onTrack[beginAt]
        #expect(begin.event?.name == "hang")
        #expect(begin.annotations["kind"]?.hasPrefix("running") == true, "\(begin.annotations)")
        #expect(begin.annotations["thread_id"] == hang.stack.map { String($0.threadID) })
        let stack = try #require(begin.annotations["stack"], "no stack argument: \(begin.annotations)")
        #expect(stack.contains("simulatedHangInKnownFunction(milliseconds:"), "\(stack)")
        // The innermost frames, at most 16 (protoc escapes the newlines between them).
        let frames = try #require(hang.stack?.frames.count)
        #expect(stack.components(separatedBy: "\\n#").count == min(frames, HangSlices.stackFrames), "\(stack)")
        #expect(stack.hasPrefix("#0 ") && stack.contains("more frames") == (frames > HangSlices.stackFrames))
        // The next event on the track ends it, after exactly the length the detector reported.
        let end = try #require(onTrack.dropFirst(beginAt + 1).first, "no end after the begin: \(onTrack)")
        #expect(end.event?.type == "TYPE_SLICE_END")
        #expect(end.timestamp == hang.sinceNanoseconds + duration)
        #expect(end.annotations["duration_ms"].flatMap(Double.init) == Double(duration) / 1e6, "\(end.annotations)")
        // That length is the hung delivery's: it began before the hung function and ended
        // after it returned, and before the detector's handler heard of the end.
        #expect(hang.sinceNanoseconds <= returned.0 && hang.sinceNanoseconds + duration >= returned.1)
        #expect(hang.sinceNanoseconds + duration <= seen)
    }

    @Test func aHangStillGoingIsInTheTraceWhileItLasts() throws {
        let daemon = try DaemonProcess(hertz: 60, logLevel: "warning")
        defer { daemon.stop() }
        let log = Log()
        let detector = try HangDetector(configuration: Self.configuration) { log.handler($0) }
        defer { detector.stop() }
        let calls = Atomic<Int>(0)
        let release = Atomic<Bool>(false)
        let monitor = FrameMonitor(
            socketPath: daemon.socketPath,
            work: { _ in
                guard calls.add(1, ordering: .relaxed).newValue == 10 else { return }
                let (start, end) = hangInKnownFunctionUntilReleased(release)
                log.append(.hangReturned(startNs: start, endNs: end))
            },
            onReport: { _ in })
        let file = daemon.directory.appendingPathComponent("ongoing.pftrace").path
        try monitor.recordTrace(to: file)
        monitor.start(on: DispatchQueue(label: "drawing"))
        monitor.link.detectHangs(with: detector, name: "drawing")
        defer { monitor.invalidate() }
        defer { release.store(true, ordering: .relaxed) }  // first, should a check below fail

        let hang = try #require(
            log.waitForBegan { $0.stack?.contains(function: "hangInKnownFunctionUntilReleased") == true },
            "no hang named the function")
        // The work is hung until released: the file has the begin and nothing ends it.
        let during = try Self.decodeTrace(file)
        #expect(!log.entries.withLock { $0 }.contains { if case .hangReturned = $0 { true } else { false } })
        let track = try Self.hangTrack("drawing", in: during)
        let onTrack = during.filter { $0.event?.track == track }
        let beginAt = try #require(
            onTrack.firstIndex { $0.event?.type == "TYPE_SLICE_BEGIN" && $0.timestamp == hang.sinceNanoseconds },
            "the hang's begin is not in the file while it lasts: \(onTrack)")
        #expect(onTrack[beginAt].annotations["stack"]?.contains("hangInKnownFunctionUntilReleased") == true)
        #expect(onTrack.dropFirst(beginAt + 1).isEmpty, "something after the begin of a hang still going: \(onTrack)")

        release.store(true, ordering: .relaxed)
        let duration = try #require(log.waitForEnded(of: hang.id), "the hang never ended in the detector's eyes")
        let after = try Self.decodeTrace(file).filter { $0.event?.track == track }
        let end = try #require(after.dropFirst(beginAt + 1).first, "no end once the hang ended: \(after)")
        #expect(end.event?.type == "TYPE_SLICE_END" && end.timestamp == hang.sinceNanoseconds + duration)
    }

    // MARK: Reading the trace

    /// One packet of a decoded trace, as far as these tests read it.
    struct TracePacket: CustomStringConvertible {
        var timestamp: UInt64?
        var event: (type: String, track: UInt64, name: String?)?
        /// Debug annotations: name to value, as protoc prints it (strings escaped, unquoted).
        var annotations: [String: String] = [:]
        var descriptor: (uuid: UInt64, name: String?, parent: UInt64?, pid: Int32?)?
        var description: String { "\(timestamp.map(String.init) ?? "-") \(event.map { "\($0)" } ?? "") \(annotations)" }
    }

    /// The trace file decoded with Perfetto's definitions (Tests/Perfetto/protos); throws if
    /// it does not decode whole.
    static func decodeTrace(_ path: String) throws -> [TracePacket] {
        try decodeTrace(bytes: [UInt8](Data(contentsOf: URL(fileURLWithPath: path))))
    }

    static func decodeTrace(bytes: [UInt8]) throws -> [TracePacket] {
        Protoc.packets(try Protoc.run(perfettoDefinitions, input: bytes)).map(parse)
    }

    /// The uuid of the track `hangs <context>`, which must be declared once, in this process's group.
    static func hangTrack(_ context: String, in packets: [TracePacket]) throws -> UInt64 {
        let process = try #require(packets.first { $0.descriptor?.pid == getpid() }?.descriptor?.uuid, "no process track")
        let tracks = packets.compactMap(\.descriptor).filter { $0.name == "hangs " + context }
        #expect(tracks.count == 1, "\(tracks)")
        let track = try #require(tracks.first, "no track \"hangs \(context)\"")
        #expect(track.parent == process, "the hang track is not in the app's process group")
        return track.uuid
    }

    static func parse(_ lines: [String]) -> TracePacket {
        var p = TracePacket()
        func field(_ line: String, _ key: String) -> String? {
            line.hasPrefix(key + ": ") ? String(line.dropFirst(key.count + 2)) : nil
        }
        func unquoted(_ s: String) -> String {
            s.hasPrefix("\"") && s.hasSuffix("\"") && s.count >= 2 ? String(s.dropFirst().dropLast()) : s
        }
        var section = ""
        var annotation: (name: String?, value: String?)?
        var type: String?
        var track: UInt64?
        var name: String?
        var uuid: UInt64?
        var parent: UInt64?
        var pid: Int32?
        for line in lines {
            if var a = annotation {
                if line == "    }" {
                    if let n = a.name, let v = a.value { p.annotations[n] = v }
                    annotation = nil
                    continue
                }
                if let v = field(line, "      name") {
                    a.name = unquoted(v)
                } else if line.hasPrefix("      "), let range = line.range(of: "_value: ") {
                    a.value = unquoted(String(line[range.upperBound...]))
                }
                annotation = a
            } else if let v = field(line, "  timestamp") {
                p.timestamp = UInt64(v)
            } else if line == "  track_event {" || line == "  track_descriptor {" {
                section = line
            } else if line == "    debug_annotations {" {
                annotation = (nil, nil)
            } else if let v = field(line, "    type") {
                type = v
            } else if let v = field(line, "    track_uuid") {
                track = UInt64(v)
            } else if let v = field(line, "    name") {
                name = unquoted(v)
            } else if let v = field(line, "    uuid") {
                uuid = UInt64(v)
            } else if let v = field(line, "    parent_uuid") {
                parent = UInt64(v)
            } else if let v = field(line, "      pid") {
                pid = Int32(v)
            }
        }
        if section == "  track_event {" { p.event = (type ?? "", track ?? 0, name) }
        if section == "  track_descriptor {" { p.descriptor = (uuid ?? 0, name, parent, pid) }
        return p
    }
}

/// Hangs the calling thread in a known function until `release` is set, in short sleeps (the
/// stack signal cuts a sleep short). Returns when it started and ended.
@inline(never)
func hangInKnownFunctionUntilReleased(_ release: borrowing Atomic<Bool>) -> (UInt64, UInt64) {
    let start = MonotonicClock.nanoseconds()
    while !release.load(ordering: .relaxed) { usleep(1000) }
    return (start, MonotonicClock.nanoseconds())
}
