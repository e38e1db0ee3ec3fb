import DisplayLink
import Glibc
import Testing
import VsyncCore

/// The fd + dispatch form (``VsyncClient``, DisplayLink's and libvsync's core) against the REAL
/// vsyncd, driven the way a render loop drives it: poll the one fd, dispatch, take the events.
extension DisplayLinkTests {
/// Under the serialized DisplayLink parent: it counts a real daemon's ticks too.
@Suite("VsyncClient against vsyncd")
struct VsyncClientDaemon {
    @Test func aPollLoopGetsTicksAtItsRateAndSurvivesADaemonRestart() throws {
        let daemon = try DaemonProcess(hertz: 60, logLevel: "warning")
        defer { daemon.stop() }
        var config = VsyncClient.Configuration(socketPath: daemon.socketPath, clientName: "poll-loop")
        config.initialBackoffNs = 20_000_000
        let client = try VsyncClient(config)
        #expect(client.connect(timeoutNs: 2_000_000_000) == nil)
        let id = client.subscribe(.primary, range: FrameRateRange(preferredFramesPerSecond: 30))

        /// Polls the client's fd like an app loop until `count` frames came or `seconds` passed.
        func frames(_ count: Int, within seconds: Double) -> (frames: [ClientFrame], errors: [DisplayLinkError]) {
            var frames: [ClientFrame] = []
            var errors: [DisplayLinkError] = []
            let deadline = monotonicNowNs() + UInt64(seconds * 1e9)
            var pfd = pollfd(fd: client.fileDescriptor, events: Int16(POLLIN), revents: 0)
            while frames.count < count && monotonicNowNs() < deadline {
                _ = poll(&pfd, 1, 100)
                client.dispatch(timeoutMs: 0)
                while let event = client.nextEvent() {
                    switch event {
                    case .frame(let frame): frames.append(frame)
                    case .error(_, let error): errors.append(error)
                    default: break
                    }
                }
            }
            return (frames, errors)
        }

        let first = frames(10, within: 5)
        #expect(first.frames.count == 10)
        #expect(first.frames.allSatisfy { $0.subscriptionID == id && $0.divisor == 2 && $0.sequence % 2 == 0 })
        // Every due tick is delivered or counted: consecutive sequences step by 2 × (1 + skipped).
        for (a, b) in zip(first.frames, first.frames.dropFirst()) {
            #expect(b.sequence - a.sequence == 2 * (1 + UInt64(b.skipped)), "\(a.sequence) → \(b.sequence), skipped \(b.skipped)")
        }
        #expect(client.subscription(id)?.display?.connectorName == "timer")

        // The daemon restarts: the same fd reports the loss, then ticks again at the same rate.
        let fd = client.fileDescriptor
        daemon.kill()
        try daemon.start()
        let again = frames(5, within: 5)
        #expect(again.errors.contains(.connectionLost(socketPath: daemon.socketPath)))
        #expect(again.frames.count == 5)
        #expect(again.frames.allSatisfy { $0.divisor == 2 })
        #expect(client.fileDescriptor == fd)
    }

    /// `dispatch(timeoutMs: -1)` in the steady state waits in the socket read itself; it must
    /// still deliver every due tick (counted by sequence) and the control messages between them.
    @Test(.timeLimit(.minutes(1)))
    func dispatchWithoutLimitDeliversEveryDueTickAndLaterRequestsStillGoOut() throws {
        let daemon = try DaemonProcess(hertz: 120, logLevel: "warning")
        defer { daemon.stop() }
        let client = try VsyncClient(.init(socketPath: daemon.socketPath, clientName: "blocking-loop"))
        #expect(client.connect(timeoutNs: 2_000_000_000) == nil)
        let id = client.subscribe(.primary, range: .default)
        var frames: [ClientFrame] = []
        var subscribed: [UInt32] = []
        while frames.count < 40 {
            client.dispatch(timeoutMs: -1)
            while let event = client.nextEvent() {
                switch event {
                case .frame(let frame): frames.append(frame)
                case .subscribed(let answer): subscribed.append(answer.divisor)
                default: break
                }
            }
            // Halfway, a rate change goes out from the loop's own thread and is answered.
            if frames.count >= 20 && subscribed.count == 1 { client.setRange(id, FrameRateRange(preferredFramesPerSecond: 40)) }
        }
        #expect(subscribed == [1, 3])
        for (a, b) in zip(frames, frames.dropFirst()) where a.divisor == b.divisor {
            #expect(b.sequence - a.sequence == UInt64(b.divisor) * (1 + UInt64(b.skipped)))
        }
        #expect(frames.last?.divisor == 3)
    }
}
}
