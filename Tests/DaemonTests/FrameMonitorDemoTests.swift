import Dispatch
import Foundation
import Glibc
import Synchronization
import TestSupport
import Testing

@testable import DisplayLink

/// The demo: an app drawing on the CPU under a load the test makes, on the real vsyncd's timer
/// source, with three faults injected: the app sleeps past its target once, vsyncd is stopped
/// (SIGSTOP) for 50 ms, and the app hangs 300 ms in a known function. Its FrameMonitor names
/// each late frame's reason and its HangDetector the hung function, while it hangs.
extension HangDetectorTests {
    @Test func aDrawingAppsReportNamesEachInjectedFault() async throws {
        let daemon = try DaemonProcess(hertz: 60, logLevel: "warning")
        defer { daemon.stop() }
        let loading = Atomic<Bool>(true)
        let load = Thread {
            var x: UInt64 = 0
            while loading.load(ordering: .relaxed) { x &+= 1 }
            _ = x
        }
        load.start()
        defer { loading.store(false, ordering: .relaxed) }
        let log = Log()
        let detector = try HangDetector(configuration: Self.configuration) { log.handler($0) }
        defer { detector.stop() }

        let calls = Atomic<Int>(0)
        // Set once vsyncd runs again: the frame that hangs, ten after the stop whatever the load
        // (not the delivered-late one, whose reason the hang would also make late).
        let hangAt = Atomic<Int>(.max)
        // Each callback's target vblank and when its work began; the frame that slept.
        let begun = Mutex<[(target: UInt64, ns: UInt64)]>([])
        let slept = Mutex<UInt64?>(nil)
        let pixels = Mutex([UInt32](repeating: 0, count: 160 * 120))
        let monitor = FrameMonitor(
            socketPath: daemon.socketPath,
            work: { link in
                let n = calls.add(1, ordering: .relaxed).newValue
                guard let frame = link.currentFrame else { return }
                begun.withLock { $0.append((frame.targetSequence, MonotonicClock.nanoseconds())) }
                // Draw: a gradient that moves with the frame.
                let shift = Int(truncatingIfNeeded: frame.sequence)
                pixels.withLock { p in for i in p.indices { p[i] = UInt32(truncatingIfNeeded: i &+ shift) } }
                if n == 20 {  // too slow once: done 10 ms past the target vblank
                    let now = MonotonicClock.nanoseconds()
                    let until = frame.targetTimestampNanoseconds + 10_000_000
                    if until > now { usleep(UInt32((until - now) / 1000)) }
                    slept.withLock { $0 = frame.targetSequence }
                }
                if n == hangAt.load(ordering: .relaxed) {
                    let (start, end) = simulatedHangInKnownFunction(milliseconds: Self.hangMs)
                    log.append(.hangReturned(startNs: start, endNs: end))
                }
            },
            onReport: { _ in })
        let late = Mutex<[FrameMonitor.LateFrame]>([])
        monitor.lateFrameHandler = { frame in late.withLock { $0.append(frame) } }
        let file = daemon.directory.appendingPathComponent("demo.pftrace").path
        try monitor.recordTrace(to: file)
        monitor.start(on: DispatchQueue(label: "drawing"))
        monitor.link.detectHangs(with: detector, name: "drawing")
        defer { monitor.invalidate() }

        #expect(await eventually(timeout: 5) { calls.load(ordering: .relaxed) >= 40 })
        kill(daemon.pid, SIGSTOP)
        usleep(50_000)  // the fault itself: how long vsyncd stays stopped
        let continued = monotonicNowNs()
        kill(daemon.pid, SIGCONT)
        let callsAtContinue = calls.load(ordering: .relaxed)
        hangAt.store(callsAtContinue + 10, ordering: .relaxed)
        #expect(log.waitForEnded(), "the hang never ended in the detector's eyes")
        #expect(await eventually(timeout: 5) { calls.load(ordering: .relaxed) >= callsAtContinue + 30 })
        monitor.invalidate()

        let frames = late.withLock { $0 }
        let report = frames.map { "frame for vblank \($0.targetSequence): \($0.reason.name)" }.joined(separator: "\n")
        // The frame that slept past its target: the app's missed deadline.
        let sleptTarget = try #require(slept.withLock { $0 })
        #expect(frames.contains { $0.targetSequence == sleptTarget && $0.reason == .appDeadlineMissed }, "\(report)")
        // The first frame begun after vsyncd went on: delivered late.
        let resumed = try #require(begun.withLock { $0 }.first { $0.ns >= continued }, "no frame after the stop")
        #expect(frames.contains { $0.targetSequence == resumed.target && $0.reason == .deliveryLate }, "\(report)")
        // The hang: reported naming the function before it returned.
        let entries = log.entries.withLock { $0 }
        let returnedAt = try #require(entries.firstIndex { if case .hangReturned = $0 { true } else { false } })
        let named = entries[..<returnedAt].contains { entry in
            guard case .began(let hang) = entry else { return false }
            return hang.context == "drawing" && hang.stack?.contains(function: "simulatedHangInKnownFunction") == true
        }
        #expect(named, "\(entries)")

        // The run's Perfetto trace decodes whole with Perfetto's definitions, and holds each
        // fault as ui.perfetto.dev shows it: printed, one packet of each kind.
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: file)))
        let packets = Protoc.packets(try Protoc.run(Self.perfettoDefinitions, input: bytes))
        func actualFrame(target: UInt64) -> [String]? {
            packets.first { p in
                p.contains { $0.hasSuffix("actual_surface_frame_start {") } && p.contains { $0.hasSuffix("display_frame_token: \(target)") }
            }
        }
        let faults: [(String, UInt64, FrameJankReason)] = [
            ("the app slept past its target", sleptTarget, .appDeadlineMissed),
            ("vsyncd stopped 50 ms", resumed.target, .deliveryLate),
        ]
        for (fault, target, reason) in faults {
            let frame = try #require(actualFrame(target: target), "no actual frame for vblank \(target) in the trace")
            #expect(frame.contains { $0.hasSuffix("jank_type: \(reason.perfettoJankType.rawValue)") }, "\(frame)")
            print("demo trace, \(fault) (\(reason.name)):\n" + frame.joined(separator: "\n"))
        }
        let hangBegin = try #require(
            packets.first { p in p.contains { $0.hasSuffix("TYPE_SLICE_BEGIN") } && p.contains { $0.contains("simulatedHangInKnownFunction") } },
            "no hang slice naming the function in the trace")
        print("demo trace, the hang's slice begin:\n" + hangBegin.map { $0.count > 240 ? $0.prefix(240) + "…" : $0 }.joined(separator: "\n"))
    }

    /// protoc's arguments to decode a trace with Perfetto's definitions.
    static var perfettoDefinitions: [String] { Protoc.perfettoTraceArguments }
}
