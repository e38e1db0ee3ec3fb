import DisplayLink
import Testing

extension DisplayLinkTests {
/// `DisplayLink.frames` against the REAL vsyncd: the stream skips like every other context.
@Suite("DisplayLink frames stream")
struct Streams {
    @Test func aSlowConsumerSeesEverySkippedFrameCounted() async throws {
        let daemon = try DaemonProcess(hertz: 60, logLevel: "warning")
        defer { daemon.stop() }
        let link = DisplayLink(socketPath: daemon.socketPath) { _ in }
        defer { link.invalidate() }
        var frames: [DisplayLink.Frame] = []
        for await frame in link.frames {
            frames.append(frame)
            // Every third frame the consumer is slow for about 3 frames.
            if frames.count % 3 == 0 { try await Task.sleep(nanoseconds: 50_000_000) }
            if frames.count == 12 { break }
        }
        #expect(frames.count == 12)
        // Full rate (divisor 1): each step is the frame itself plus the ones it replaced.
        for (a, b) in zip(frames, frames.dropFirst()) {
            #expect(b.sequence - a.sequence == 1 + UInt64(b.skipped), "\(a.sequence) → \(b.sequence), skipped \(b.skipped)")
        }
        #expect(frames.contains { $0.skipped > 0 }, "the slow consumer skipped frames and was told so")
    }
}
}
