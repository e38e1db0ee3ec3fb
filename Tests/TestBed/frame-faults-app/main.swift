// frame-faults-app: a test bed helper (Tests/VMTests/FrameFaultsVMTests.swift). A real app process
// that follows the display with a FrameMonitor, the monitor's Perfetto trace and a HangDetector,
// and injects its own faults when its test says so, by signal, so that each fault lands on a frame
// the test can name by its vblank sequence rather than by time:
//
//   SIGUSR1  the next frame sleeps two and a half frames: past its target whenever its tick came
//   SIGUSR2  the next frame hangs 300 ms in simulatedHangInKnownFunction(milliseconds:)
//   SIGTERM, SIGINT  stop, exit 0 (the trace is whole after every frame and hang event)
//
// It prints one line per event to stdout, in the order they happened (one lock for all):
//   frame target=T seq=S gen=G period=NS vblank=NS start=NS   each callback, as it begins
//   late target=T reason=NAME at=NS                    a late frame, with the monitor's reason
//   slept target=T                                      the frame that slept
//   hang began context=C kind=K named=yes|no since=NS detected=NS reported=NS stack=…
//                                                       the detector's report, while it hangs
//                                                       (reported: when it called the handler)
//   hang returned start=NS end=NS                       the hung function returned
//   hang ended duration=NS                              the detector saw the context move again
// Not a product: the faults are a test's, never the library's.
import ArgumentParser
import Dispatch
import DisplayLink
import Glibc
import Synchronization

/// Every line through one lock and one write(2), so their order in the file is the order they
/// happened in, across the link's queue and the detector's thread.
final class Lines: Sendable {
    private let lock = Mutex(())
    func print(_ text: String) {
        lock.withLock { _ in
            let line = text + "\n"
            _ = line.withCString { write(1, $0, strlen($0)) }
        }
    }
}

/// The hang the test looks for by name: its frame must stay in the stack, hence no inlining.
@inline(never)
func simulatedHangInKnownFunction(milliseconds: UInt64) -> (UInt64, UInt64) {
    let start = DisplayLink.currentTimeNanoseconds()
    while DisplayLink.currentTimeNanoseconds() - start < milliseconds * 1_000_000 { usleep(1000) }
    return (start, DisplayLink.currentTimeNanoseconds())
}

struct FrameFaultsApp: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "frame-faults-app",
        abstract: "Follow the display with a FrameMonitor, its trace and a hang detector; inject faults on signals (test helper).")

    @Option(help: "The vsyncd socket.")
    var socket: String
    @Option(help: "Where to write the monitor's Perfetto trace.")
    var trace: String
    @Option(help: "How long the SIGUSR2 hang lasts, in ms.")
    var hangMs: UInt64 = 300

    func run() throws {
        let out = Lines()
        let sleepNext = Atomic<Bool>(false)
        let hangNext = Atomic<Bool>(false)
        let hangMs = hangMs
        // 50 ms, looked at every 10 ms: the 300 ms hang leaves the watcher some 240 ms to take
        // and name the stack and call this handler, which in a TCG guest on a loaded host, its
        // page cache dropped first, took 70-180 ms.
        let detector = try HangDetector(configuration: .init(threshold: 0.05, checkInterval: 0.01)) { event in
            // When the detector reported: this handler's own formatting below is the app's work.
            let reported = DisplayLink.currentTimeNanoseconds()
            switch event {
            case .began(let hang):
                let named = hang.stack?.contains(function: "simulatedHangInKnownFunction") == true
                let stack = hang.stack.map { $0.frames.prefix(6).map { $0.symbol ?? "?" }.joined(separator: " | ") } ?? (hang.stackUnavailable ?? "none")
                out.print(
                    "hang began context=\(hang.context) kind=\(hang.kind) named=\(named ? "yes" : "no") since=\(hang.sinceNanoseconds) detected=\(hang.detectedNanoseconds) reported=\(reported) stack=\(stack)"
                )
            case .ended(_, let ns):
                out.print("hang ended duration=\(ns)")
            }
        }
        let pixels = Mutex([UInt32](repeating: 0, count: 64 * 48))
        let monitor = FrameMonitor(
            socketPath: socket,
            work: { link in
                guard let frame = link.currentFrame else { return }
                out.print(
                    "frame target=\(frame.targetSequence) seq=\(frame.sequence) gen=\(frame.generation) period=\(frame.durationNanoseconds) vblank=\(frame.timestampNanoseconds) start=\(DisplayLink.currentTimeNanoseconds())"
                )
                // Draw: a small gradient that moves with the frame, well within any frame's time.
                let shift = Int(truncatingIfNeeded: frame.sequence)
                pixels.withLock { p in for i in p.indices { p[i] = UInt32(truncatingIfNeeded: i &+ shift) } }
                if sleepNext.exchange(false, ordering: .relaxed) {
                    // Longer than the whole frame, so its own work misses the target however late
                    // its tick came: the app's fault, not delivery's.
                    usleep(UInt32(frame.durationNanoseconds * 5 / 2 / 1000))
                    out.print("slept target=\(frame.targetSequence)")
                }
                if hangNext.exchange(false, ordering: .relaxed) {
                    let (start, end) = simulatedHangInKnownFunction(milliseconds: hangMs)
                    out.print("hang returned start=\(start) end=\(end)")
                }
            },
            onReport: { _ in })
        monitor.lateFrameHandler = {
            out.print("late target=\($0.targetSequence) reason=\($0.reason.name) at=\(DisplayLink.currentTimeNanoseconds())")
        }
        monitor.errorHandler = { out.print("error \($0)") }
        try monitor.recordTrace(to: trace)
        monitor.start(on: DispatchQueue(label: "drawing"))
        monitor.link.detectHangs(with: detector, name: "drawing")

        var sources: [DispatchSourceSignal] = []
        func on(_ signal: Int32, _ action: @escaping @Sendable () -> Void) {
            Glibc.signal(signal, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signal, queue: .main)
            source.setEventHandler(handler: action)
            source.resume()
            sources.append(source)
        }
        on(SIGUSR1) { sleepNext.store(true, ordering: .relaxed) }
        on(SIGUSR2) { hangNext.store(true, ordering: .relaxed) }
        for signal in [SIGTERM, SIGINT] {
            on(signal) {
                monitor.invalidate()
                detector.stop()
                out.print("stopped")
                Glibc.exit(0)
            }
        }
        withExtendedLifetime(sources) { dispatchMain() }
    }
}

FrameFaultsApp.main()
