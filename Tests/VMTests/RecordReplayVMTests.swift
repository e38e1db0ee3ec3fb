import Foundation
import Testing
import VsyncCore

/// A recording replays to the live ticks: `vsync-probe record` in the VM test bed while vsyncd serves a live client,
/// then the recording replayed through vsyncd on the host: the replayed ticks are the live ones
/// (same sequences, same timestamps after the replay's one constant move, and skipped counts
/// that account for exactly the frames between, whatever the live client coalesced).
@Suite(.serialized)
struct RecordReplayVMTests {
    @Test func aRecordingReplaysToTheLiveTicks() async throws {
        var script = try VsyncdGuestScript()
        script.shell("vsyncd_start")
        // The recorder first, and running (its first vblank line written) before the client starts.
        script.shell("\"$VSYNC_BIN/vsync-probe\" record --seconds 8 --out /tmp/rec.trace 2>/tmp/rec.err & REC=$!")
        script.shell("i=0; until grep -q '^vblank' /tmp/rec.trace 2>/dev/null; do i=$((i+1)); [ $i -gt 600 ] && { echo '@@error recorder wrote no vblank'; break; }; sleep 0.05; done")
        script.shell("follow live --frames 120")
        script.shell("wait $PID_live; echo \"@@live.status $?\"")
        script.shell("wait $REC; echo \"@@rec.status $?\"; sed 's/^/@@trace /' /tmp/rec.trace; sed 's/^/@@rec.err /' /tmp/rec.err")
        script.shell("vsyncd_stop; dump")
        let out = try await script.run(timeout: 300)
        #expect(out.status("live") == 0 && out.status("rec") == 0, "\(out)")
        let live = out.ticks("live")
        try #require(live.count == 120, "live ticks: \(live.count): \(out)")

        let file = FileManager.default.temporaryDirectory.appendingPathComponent("vm-\(UUID().uuidString.prefix(8)).trace")
        try (out.all("trace").joined(separator: "\n") + "\n").write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        let trace = try VBlankTrace(parsing: String(contentsOf: file, encoding: .utf8))
        var stamps: [UInt64: UInt64] = [:]
        for case let .vblank(_, s, t) in trace.events { stamps[s] = t }
        // Both read the same kernel: every vblank the live client got is in the recording.
        for t in live { #expect(stamps[t.seq] == t.timestampNs, "live tick \(t.seq) is not the recorded vblank") }

        let replayed = try Self.replay(file.path, until: live.last!.seq)
        let offset = replayed[0].timestampNs &- stamps[replayed[0].sequence]!
        // The replay's fast client takes every tick; the live client, in a guest under TCG, is
        // sometimes late and its core keeps only the newest tick waiting (the older ones count
        // in its `skipped`). So: every live tick is a replayed tick, at the same time, and its
        // skipped count is exactly the frames the replay delivered or skipped since the live
        // client's previous tick. Nothing lost or invented on either side.
        let span = live.first!.seq...live.last!.seq
        let inSpan = replayed.filter { span.contains($0.sequence) }
        #expect(Set(live.map(\.seq)).isSubset(of: Set(inSpan.map(\.sequence))),
                "live ticks the replay did not give: \(Set(live.map(\.seq)).subtracting(inSpan.map(\.sequence)).sorted())")
        let bySequence = Dictionary(replayed.map { ($0.sequence, $0) }, uniquingKeysWith: { a, _ in a })
        var coalesced = 0
        for (previous, t) in zip(live, live.dropFirst()) {
            let r = bySequence[t.seq]
            #expect(r.map { $0.timestampNs &- offset } == t.timestampNs, "tick \(t.seq)")
            let between = inSpan.filter { $0.sequence > previous.seq && $0.sequence <= t.seq }
            let frames = between.reduce(0) { $0 + Int($1.skipped) + 1 } - 1
            #expect(t.skipped == frames, "tick \(t.seq): skipped \(t.skipped) live, the replay's frames since tick \(previous.seq): \(frames)")
            coalesced += between.count - 1
        }
        print("record/replay: \(live.count) live ticks, \(inSpan.count) replayed over the span, \(coalesced) taken by the live client's own coalescing")
    }

    /// Runs the host's vsyncd on the trace (at the recorded speed, so its timestamps are the
    /// recording's moved by one constant) and collects a full-rate client's ticks up to `last`.
    static func replay(_ path: String, until last: UInt64) throws -> [Tick] {
        let vsyncd = try GuestVM.productPath("vsyncd")
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("replay-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let socket = dir.appendingPathComponent("s.sock").path
        let process = Process()
        process.executableURL = URL(fileURLWithPath: vsyncd)
        process.arguments = ["--source", "replay:\(path)@1", "--socket", socket]
        process.standardError = FileHandle.nullDevice
        try process.run()
        defer { process.terminate(); process.waitUntilExit() }
        let client = try ReplayClient(socket: socket)
        var ticks: [Tick] = []
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline, ticks.last.map({ $0.sequence < last }) ?? true {
            guard let t = client.nextTick() else { continue }
            ticks.append(t)
        }
        try #require(ticks.last?.sequence ?? 0 >= last, "the replay never reached \(last)")
        return ticks
    }
}

/// A minimal raw-protocol client for the replay (the VM tests have no RawClient).
final class ReplayClient {
    let fd: Int32

    init(socket path: String) throws {
        var fd: Int32 = -1
        for _ in 0..<400 {  // until vsyncd listens (at most 10 s)
            fd = Glibc.socket(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue), 0)
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            withUnsafeMutableBytes(of: &address.sun_path) { raw in for (i, b) in path.utf8.enumerated() { raw[i] = b } }
            let rc = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
            if rc == 0 { break }
            close(fd); fd = -1
            usleep(25_000)
        }
        guard fd >= 0 else { throw GuestVMError.productMissing(name: "vsyncd socket", path: path) }
        self.fd = fd
        send(.hello(Hello(minVersion: 1, maxVersion: 1, clientName: "replay")))
        send(.subscribe(Subscribe(subscriptionID: 1, selector: .primary, range: FrameRateRange(preferredFramesPerSecond: 0), flags: [])))
    }

    deinit { close(fd) }

    func send(_ message: ClientMessage) {
        let bytes = message.encoded()
        _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    /// The next tick within a second, skipping other messages.
    func nextTick() -> Tick? {
        var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        var buffer = [UInt8](repeating: 0, count: 8192)
        while poll(&pfd, 1, 1000) > 0 {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard n > 0 else { return nil }
            if case .tick(let t)? = try? ServerMessage.decode(Array(buffer[0..<n])) { return t }
        }
        return nil
    }
}
