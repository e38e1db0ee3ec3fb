@testable import DisplayLink
import Dispatch
import Foundation
import Glibc
import Synchronization
import Testing
import VsyncCore

/// DisplayLink's lifecycle promises, against the real vsyncd: the reader thread's life, the frame a
/// callback reads on each context, the work duration's range, and the settings' one owner.
extension DisplayLinkTests {
    @Suite
    struct Lifecycle {
        @Test func theReaderThreadEndsWithTheLastLinkAndTheNextLinkStartsAnother() async throws {
            let daemon = try DaemonProcess(hertz: 60, logLevel: "warning")
            defer { daemon.stop() }
            let connection = DisplayLinkConnection.shared(socketPath: daemon.socketPath)
            let recorder = LinkRecorder()
            let link = DisplayLink(socketPath: daemon.socketPath, handler: recorder.handler())
            link.start(on: DispatchQueue(label: "first"))
            #expect(connection.readerStatus == (true, 1))
            #expect(await eventually(timeout: 3) { recorder.count >= 3 })
            link.invalidate()
            // The core closes its idle socket a second after the last link; then the reader ends.
            #expect(await eventually(timeout: 4) { !connection.readerStatus.running }, "the reader thread outlived the last link")
            #expect(connection.readerStatus.started == 1)

            let again = LinkRecorder()
            let next = DisplayLink(socketPath: daemon.socketPath, handler: again.handler())
            next.start(on: DispatchQueue(label: "next"))
            #expect(connection.readerStatus == (true, 2))
            #expect(await eventually(timeout: 3) { again.count >= 3 }, "a new link ticks on a new reader")
            next.invalidate()
        }

        /// A link on a run loop and a queue at once: a run loop callback that waits until the
        /// queue has had a newer frame still reads its own frame in every property.
        @Test func eachContextsCallbackReadsItsOwnFrame() async throws {
            let daemon = try DaemonProcess(hertz: 60, logLevel: "warning")
            defer { daemon.stop() }
            let queueLatest = Mutex<UInt64>(0)
            let newer = DispatchSemaphore(value: 0)
            let checks = Mutex<[(own: DisplayLink.Frame, read: (UInt64, UInt64, UInt64, UInt64))]>([])
            let key = DispatchSpecificKey<Int>()
            let queue = DispatchQueue(label: "second-context")
            queue.setSpecific(key: key, value: 1)
            let link = DisplayLink(socketPath: daemon.socketPath) { link in
                guard let own = link.currentFrame else { return }
                if DispatchQueue.getSpecific(key: key) == 1 {
                    queueLatest.withLock { $0 = max($0, own.sequence) }
                    newer.signal()
                    return
                }
                guard checks.withLock({ $0.count }) < 3 else { return }
                // On the run loop: wait (up to 1 s) for the queue to take a newer frame.
                let deadline = DispatchTime.now() + 1
                while queueLatest.withLock({ $0 }) <= own.sequence, newer.wait(timeout: deadline) == .success {}
                let read = (link.sequence, link.timestampNanoseconds, link.targetTimestampNanoseconds, link.targetSequence)
                checks.withLock { $0.append((own, read)) }
            }
            let thread = RunLoopThread(setup: { link.add(to: $0, forMode: .default) }, schedule: [(.default, 2)])
            link.start(on: queue)
            #expect(await eventually(timeout: 3) { checks.withLock { $0.count } >= 3 })
            await thread.waitUntilFinished()
            link.invalidate()
            #expect(queueLatest.withLock { $0 } > 0, "the queue context ticked")
            for (own, read) in checks.withLock({ $0 }) {
                #expect(read == (own.sequence, own.timestampNanoseconds, own.targetTimestampNanoseconds, own.targetSequence),
                        "run loop callback for \(own.sequence) read \(read)")
            }
            // Outside any callback: the newest frame a context took, read whole.
            let last = try #require(link.currentFrame)
            #expect(last.targetTimestampNanoseconds > last.timestampNanoseconds)
        }

        @Test func aWorkDurationOutOfRangeIsRefusedNotClamped() throws {
            let link = DisplayLink(socketPath: "/nonexistent/vsyncd.sock") { _ in }
            try link.setWorkDuration(.milliseconds(4))
            #expect(link.workDuration == .milliseconds(4))
            #expect(throws: DisplayLink.InvalidWorkDuration(requested: .milliseconds(1500))) {
                try link.setWorkDuration(.milliseconds(1500))
            }
            #expect(throws: DisplayLink.InvalidWorkDuration.self) { try link.setWorkDuration(.milliseconds(-1)) }
            #expect(link.workDuration == .milliseconds(4), "a refused value leaves the old one")
            try link.setWorkDuration(.seconds(1))
            #expect(link.workDuration == .seconds(1))
            let message = DisplayLink.InvalidWorkDuration(requested: .milliseconds(1500)).description
            #expect(message.contains("out of range") && message.contains("0 to 1 s"), "\(message)")
        }

        /// The settings live in the link until it subscribes, in the client core while it is
        /// subscribed, and come back to the link when it unsubscribes: the same values throughout.
        @Test func settingsHaveOneOwnerAndSurviveSubscribing() async throws {
            let daemon = try DaemonProcess(hertz: 60, logLevel: "warning")
            defer { daemon.stop() }
            let recorder = LinkRecorder()
            let link = DisplayLink(socketPath: daemon.socketPath, handler: recorder.handler())
            link.preferredFramesPerSecond = 20
            link.predictsWhileOff = true
            try link.setWorkDuration(.milliseconds(3))
            link.start(on: DispatchQueue(label: "settings"))
            let id: UInt32
            if case .subscribed(let subscribed) = link.withState({ $0.subscription }) { id = subscribed } else {
                Issue.record("a started link is subscribed")
                return
            }
            let info = try #require(link.connection.subscription(id))
            #expect(info.range == FrameRateRange(preferredFramesPerSecond: 20) && info.workDurationNs == 3_000_000)
            #expect(info.flags.contains(.predictWhileOff))
            // Changed while subscribed: written to the core, read back from it.
            link.preferredFramesPerSecond = 30
            #expect(link.connection.subscription(id)?.range == FrameRateRange(preferredFramesPerSecond: 30))
            #expect(await eventually(timeout: 3) { recorder.count >= 3 })
            link.stop()
            #expect(link.connection.subscription(id) == nil)
            #expect(link.preferredFramesPerSecond == 30 && link.predictsWhileOff && link.workDuration == .milliseconds(3))
            #expect(link.maximumFramesPerSecond == 60, "the display's facts stay after unsubscribing")
            link.invalidate()
        }

        /// The reader thread checks a frame against the pause count the link had when the core
        /// read it (no core lock per frame): a frame read before a pause never reaches the
        /// handler, even once the link runs again; one read after the resume does.
        @Test func aFrameReadBeforeAPauseIsDroppedEvenAfterTheResume() async throws {
            let daemon = try DaemonProcess(hertz: 60, logLevel: "warning")
            defer { daemon.stop() }
            let recorder = LinkRecorder()
            let link = DisplayLink(socketPath: daemon.socketPath, handler: recorder.handler())
            link.start()
            #expect(await eventually(timeout: 3) { recorder.count >= 2 })
            // A sequence the daemon will not reach in this test, to tell these frames apart.
            func frame(_ sequence: UInt64) -> DisplayLink.Frame {
                DisplayLink.Frame(timestampNanoseconds: 1, targetTimestampNanoseconds: 2, durationNanoseconds: 1,
                                  sequence: sequence, skipped: 0, flags: [], receivedNanoseconds: 0)
            }
            func delivered(_ sequence: UInt64) -> Bool { recorder.all.contains { $0.frame.sequence == sequence } }
            let before = link.pauses.load(ordering: .relaxed)
            link.isPaused = true
            link.isPaused = false
            link.connectionDidDeliver(frame(1 << 60), pauses: before, inlineOn: nil)
            #expect(!delivered(1 << 60), "a frame read before the pause reached the handler")
            link.connectionDidDeliver(frame(1 << 60 + 1), pauses: link.pauses.load(ordering: .relaxed), inlineOn: nil)
            #expect(delivered(1 << 60 + 1), "a frame read after the resume was dropped")
            link.invalidate()
        }
    }
}
