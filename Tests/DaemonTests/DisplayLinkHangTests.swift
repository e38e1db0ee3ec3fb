import Dispatch
import Foundation
import Synchronization
import Testing

@testable import DisplayLink

/// A display link's handler hung on purpose in a known function, against the real vsyncd on
/// its timer source: the link's detector reports it while it hangs, naming the function.
extension HangDetectorTests {
    @Test func aLinksHandlerHungInAKnownFunctionIsReportedWhileItHangs() throws {
        let daemon = try DaemonProcess(hertz: 60, logLevel: "warning")
        defer { daemon.stop() }
        let log = Log()
        let detector = try HangDetector(configuration: Self.configuration) { log.handler($0) }
        defer { detector.stop() }
        let calls = Atomic<Int>(0)
        let link = DisplayLink(socketPath: daemon.socketPath) { _ in
            guard calls.add(1, ordering: .relaxed).newValue == 10 else { return }
            let (start, end) = simulatedHangInKnownFunction(milliseconds: Self.hangMs)
            log.append(.hangReturned(startNs: start, endNs: end))
        }
        link.start(on: DispatchQueue(label: "hung link"))
        link.detectHangs(with: detector, name: "hung link")
        defer { link.invalidate() }
        #expect(log.waitForEnded(), "the hang never ended in the detector's eyes")
        let entries = log.entries.withLock { $0 }
        let returnedAt = try #require(entries.firstIndex { if case .hangReturned = $0 { true } else { false } })
        guard case .hangReturned(let start, let end) = entries[returnedAt] else { return }
        // Reported before the hung function returned, with that function in the stack.
        let reported = entries[..<returnedAt].compactMap { entry -> HangDetector.Hang? in
            guard case .began(let hang) = entry, hang.stack?.contains(function: "simulatedHangInKnownFunction") == true
            else { return nil }
            return hang
        }
        let hang = try #require(reported.first, "no report naming the function before it returned: \(entries)")
        #expect(hang.context == "hung link" && hang.kind == .running)
        #expect(hang.sinceNanoseconds <= start && hang.detectedNanoseconds < end)
        let ended = entries.compactMap { entry -> UInt64? in
            guard case .ended(let h, let duration) = entry, h.id == hang.id else { return nil }
            return duration
        }
        // The handler's whole run: at least the hung function's.
        #expect(ended.count == 1 && ended[0] >= end - start, "\(ended)")
    }
}
