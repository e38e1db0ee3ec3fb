import ArgumentParser
import Dispatch
@_spi(Benchmark) import DisplayLink
import Foundation
import ProcessTools
import Synchronization

/// How late a link's callbacks start while FrameWork keeps its pool busy, against the same link
/// with the pool idle, in alternating rounds of one run (the machine's other load moves both
/// alike). Each loaded round uses one pool setup; the unloaded rounds between them are the floor.
/// `inherited` is a pool as wide as the machine at the link's priority, for comparison with the
/// library's `default`; the lowered priorities are there to be measured, not used in apps.
///
///     swift build && swift build --package-path Benchmarks && Benchmarks/.build/debug/vsync-bench-framework --rounds 6
///
/// Lateness is the callback's start less its frame's vblank (`timestamp`): the delay from the
/// vblank to the app's code, daemon and library included. A callback that starts after its
/// `targetTimestamp` has already missed the frame it was for.
@main
struct FrameWorkBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "vsync-bench-framework",
        abstract: "Measure a DisplayLink's callback lateness with and without FrameWork's pool under load.")

    @Option(
        help:
            "Pool setups to load in turn: default (the library's pool), or PRIORITY[xTHREADS] with PRIORITY one of inherited, nice1…nice19, batch, idle (THREADS: the active cores unless given)."
    )
    var pools = "default,inherited"
    @Option(help: "Rounds; each visits every pool setup, with an unloaded second before each.")
    var rounds = 6
    @Option(help: "Seconds per condition in a round.")
    var seconds = 1.0
    @Option(help: "The vsyncd binary (default: next to this one, else the product package's build of the same configuration).")
    var vsyncd: String?
    @Option(help: "Refresh rate of vsyncd's timer source.")
    var hertz = 60

    func run() throws {
        let setups = try pools.split(separator: ",").map { try Setup(String($0)) }
        let daemon = try Daemon(binary: vsyncd, hertz: hertz)
        defer { daemon.stop() }
        let bench = Bench(setups: setups)
        let link = DisplayLink(socketPath: daemon.socketPath) { link in bench.frame(link) }
        link.errorHandler = { error in print("vsync: \(error)") }
        link.start(on: DispatchQueue(label: "link"))
        print(
            "vsync-bench-framework: \(hertz) Hz timer source, 8 tiles of 5–12 ms requested every frame, "
                + "\(ProcessInfo.processInfo.activeProcessorCount) cores, load average \(Bench.loadAverage())")
        for _ in 0..<rounds {
            for i in setups.indices {
                bench.switchTo(nil)
                Thread.sleep(forTimeInterval: seconds)
                bench.switchTo(i)
                Thread.sleep(forTimeInterval: seconds)
            }
        }
        bench.switchTo(nil)
        link.invalidate()
        bench.report()
    }
}

/// One pool setup under test: `default` (the library's own pool), or `PRIORITY[xTHREADS]` with
/// PRIORITY one of `inherited`, `nice1`…`nice19`, `batch`, `idle`, and THREADS the active cores
/// unless given (so `inherited` is a pool as wide as the machine at the link's priority).
struct Setup {
    let name: String
    let pool: FrameWorkPool

    init(_ name: String) throws {
        self.name = name
        if name == "default" {
            pool = FrameWorkPool()
            return
        }
        let parts = name.split(separator: "x", maxSplits: 1)
        let cores = min(max(ProcessInfo.processInfo.activeProcessorCount, 1), 16)
        let threads = try parts.count == 2 ? Self.number(parts[1], in: 1...16, name) : cores
        let priority: FrameWorkPool.Priority
        switch parts[0] {
        case "inherited": priority = .inherited
        case "batch": priority = .batch
        case "idle": priority = .idle
        case let p where p.hasPrefix("nice"): priority = .nice(try Self.number(p.dropFirst(4), in: 1...19, name))
        default:
            throw ValidationError(
                "unknown pool setup \(name): use default, or inherited, nice1…nice19, batch or idle, then xTHREADS if wanted")
        }
        pool = FrameWorkPool(threadCount: threads, priority: priority)
    }

    static func number(_ text: Substring, in range: ClosedRange<Int>, _ name: String) throws -> Int {
        guard let n = Int(text), range.contains(n) else { throw ValidationError("\(name): \(text) is outside \(range)") }
        return n
    }
}

/// The link's side: records each callback under the current condition and, when loaded,
/// keeps the condition's pool busy.
final class Bench: Sendable {
    struct Samples {
        var latenessNs: [UInt64] = []
        var afterTarget = 0
        var counts = FrameWorkCounts()
    }

    struct State {
        /// nil: unloaded; else the index of the loaded setup.
        var condition: Int?
        var framesInCondition = 0
        var unloaded = Samples()
        var loaded: [Samples]
    }

    /// Callbacks right after a switch are left out: the previous condition's runs are still
    /// reaching their next cancellation check.
    static let settleFrames = 6
    static let tileCostsNs: [UInt64] = (5...12).map { UInt64($0) * 1_000_000 }

    let names: [String]
    let works: [FrameWork<Int, Int>]
    private let state: Mutex<State>

    init(setups: [Setup]) {
        names = setups.map(\.name)
        works = setups.map { FrameWork(pool: $0.pool) }
        state = Mutex(State(loaded: Array(repeating: Samples(), count: setups.count)))
    }

    func switchTo(_ condition: Int?) {
        let previous = state.withLock { s -> Int? in
            defer {
                s.condition = condition
                s.framesInCondition = 0
            }
            return s.condition
        }
        if let previous {
            works[previous].cancelAll()
            state.withLock { $0.loaded[previous].counts = works[previous].counts }
        }
    }

    func frame(_ link: DisplayLink) {
        let now = DisplayLink.currentTimeNanoseconds()
        guard let frame = link.currentFrame else { return }
        let condition = state.withLock { s -> Int? in
            s.framesInCondition += 1
            guard s.framesInCondition > Self.settleFrames else { return s.condition }
            let lateness = now > frame.timestampNanoseconds ? now - frame.timestampNanoseconds : 0
            let after = now > frame.targetTimestampNanoseconds
            if let c = s.condition {
                s.loaded[c].latenessNs.append(lateness)
                if after { s.loaded[c].afterTarget += 1 }
            } else {
                s.unloaded.latenessNs.append(lateness)
                if after { s.unloaded.afterTarget += 1 }
            }
            return s.condition
        }
        guard let condition else { return }
        let work = works[condition]
        work.advance(link) { _ in
        } requesting: {
            for (tile, cost) in Self.tileCostsNs.enumerated() {
                work.request(tile) { run in try Self.draw(for: cost, run) }
            }
        }
    }

    /// Busy drawing for `ns`, checking for cancellation every half millisecond.
    static func draw(for ns: UInt64, _ run: FrameWorkRun) throws -> Int {
        let start = DisplayLink.currentTimeNanoseconds()
        var nextCheck = start + 500_000
        var x = 0
        while true {
            for i in 0..<2_000 { x = x &* 31 &+ i }
            let now = DisplayLink.currentTimeNanoseconds()
            if now >= start + ns { return x }
            if now >= nextCheck {
                try run.checkCancellation()
                nextCheck = now + 500_000
            }
        }
    }

    func report() {
        let s = state.withLock { $0 }
        let floor = Self.percentile(s.unloaded.latenessNs, 0.99)
        print(
            "condition          callbacks   lateness p50    p99     max (ms)  p99/unloaded  after target | work: committed  late  superseded"
        )
        print(Self.row("unloaded", s.unloaded, floor: floor))
        for (i, name) in names.enumerated() { print(Self.row("loaded, \(name)", s.loaded[i], floor: floor)) }
    }

    static func row(_ name: String, _ samples: Samples, floor: UInt64) -> String {
        let v = samples.latenessNs
        let ms = { (ns: UInt64) in String(format: "%7.2f", Double(ns) / 1e6) }
        let ratio = floor > 0 ? String(format: "%5.2f×", Double(percentile(v, 0.99)) / Double(floor)) : "    -"
        let c = samples.counts
        return name.padding(toLength: 20, withPad: " ", startingAt: 0) + String(format: "%6d", v.count)
            + "      \(ms(percentile(v, 0.5))) \(ms(percentile(v, 0.99))) \(ms(v.max() ?? 0))        \(ratio)"
            + String(format: "  %8d", samples.afterTarget)
            + (c.requested > 0 ? String(format: "    | %14d %5d %11d", c.committed, c.late, c.superseded) : "    |")
    }

    static func percentile(_ values: [UInt64], _ p: Double) -> UInt64 {
        guard !values.isEmpty else { return 0 }
        let sorted = values.sorted()
        return sorted[min(sorted.count - 1, max(0, Int((Double(sorted.count) * p).rounded(.up)) - 1))]
    }

    static func loadAverage() -> String {
        (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8))?.split(separator: " ").prefix(3).joined(separator: " ") ?? "?"
    }
}

/// vsyncd on its timer source, on a socket of its own.
struct Daemon {
    let process = Process()
    let directory: URL
    let socketPath: String

    init(binary: String?, hertz: Int) throws {
        let path = binary ?? MainPackageBuild.product("vsyncd")
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw ValidationError("no vsyncd at \(path): build it with 'swift build' in the repository root or pass --vsyncd")
        }
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("vsync-bench-framework-\(getpid())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        socketPath = directory.appendingPathComponent("s.sock").path
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = ["--source", "timer:\(hertz)", "--socket", socketPath, "--log-level", "warning"]
        try process.run()
        let end = Date(timeIntervalSinceNow: 5)
        while !FileManager.default.fileExists(atPath: socketPath) {
            guard Date() < end, process.isRunning else { throw ValidationError("vsyncd did not start listening on \(socketPath)") }
            Thread.sleep(forTimeInterval: 0.01)
        }
    }

    func stop() {
        process.terminate()
        process.waitUntilExit()
        try? FileManager.default.removeItem(at: directory)
    }
}
