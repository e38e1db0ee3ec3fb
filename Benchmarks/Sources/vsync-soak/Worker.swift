import ArgumentParser
import Foundation
import Glibc
import ProcessTools
import VsyncCore

/// One soak client process: joins, then at random (seeded) moments pauses and resumes its
/// links, changes their rates, opens and closes extra links and makes handlers slow, until
/// its lifetime ends or SIGTERM; then writes a `WorkerReport` as JSON on stdout and exits.
struct Worker: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "One soak client (started by vsync-soak itself).")

    @Option(help: "The vsyncd socket.") var socket: String
    @Option(help: "Seed of this worker's random choices.") var seed: UInt64
    @Option(help: "Index of this worker, for its report.") var index = 0
    @Option(help: "'steady': one full-rate link with a fast handler, never changed (the client that keeps up); 'churn': random changes.")
    var role = "churn"
    @Option(help: "Seconds before the worker leaves by itself.") var lifetime = 10.0
    @Option(help: "The timer source's rate, to know which divisor each rate maps to.") var hz = 240.0
    @Option(help: "vsyncd's pid: its waits for a CPU explain a steady link's skipped frames.") var daemonPid: Int32 = 0
    @Flag(help: .hidden) var injectLoss = false

    static let rates = [0, 240, 120, 80, 60, 48, 40, 30, 24, 20, 15, 10, 5, 1, 500, 100, 90, 45]
    static let maxLinks = 4

    func run() throws {
        let signals = Signals.block([SIGTERM, SIGINT])
        var rng = SplitMix64(seed: seed)
        let steady = role == "steady"
        var report = WorkerReport()
        report.index = index
        report.role = role
        let deadline = Monotonic.seconds + lifetime

        var live: [LinkProbe] = []
        var closed: [LinkProbe] = []
        var stop = false
        // Join a little after starting, so joins are spread out.
        if Signals.wait(signals, seconds: Double.random(in: 0...0.3, using: &rng)) != nil { stop = true }
        if !stop {
            let main = LinkProbe(
                socket: socket, refreshHz: hz, keepsUp: steady, label: "soak.link.0", daemonPID: daemonPid, injectLoss: injectLoss)
            if !steady, rng.chance(0.5) { main.setFramesPerSecond(Self.rates.randomElement(using: &rng)!) }
            main.start()
            live.append(main)
            report.linksOpened += 1
        }
        var opened = 1
        while !stop {
            let now = Monotonic.seconds
            guard now < deadline else { break }
            let nap = steady ? 1.0 : Double.random(in: 0.05...0.6, using: &rng)
            if Signals.wait(signals, seconds: min(nap, deadline - now)) != nil { break }
            guard !steady, !live.isEmpty else { continue }
            let probe = live.randomElement(using: &rng)!
            switch Int.random(in: 0..<100, using: &rng) {
            case 0..<25:
                probe.setFramesPerSecond(Self.rates.randomElement(using: &rng)!)
                report.rateChanges += 1
            case 25..<40:
                probe.setRange(Self.randomRange(&rng))
                report.rateChanges += 1
            case 40..<60:
                let pause = !probe.isPaused
                probe.setPaused(pause)
                if pause { report.pauses += 1 } else { report.resumes += 1 }
            case 60..<72 where live.count < Self.maxLinks:
                let extra = LinkProbe(socket: socket, refreshHz: hz, keepsUp: false, label: "soak.link.\(opened)", injectLoss: injectLoss)
                opened += 1
                extra.setFramesPerSecond(Self.rates.randomElement(using: &rng)!)
                extra.start()
                live.append(extra)
                report.linksOpened += 1
            case 72..<82 where live.count > 1:
                let i = Int.random(in: 1..<live.count, using: &rng)
                live[i].invalidate()
                closed.append(live.remove(at: i))
                report.linksClosed += 1
            case 82..<92:
                // A handler that overruns the frame for a while: 5–30 ms at 240 Hz (4.2 ms).
                let slow = rng.chance(0.5) ? UInt32.random(in: 5_000...30_000, using: &rng) : 0
                probe.setSlow(microseconds: slow)
                if slow > 0 { report.slowSpells += 1 }
            default:
                break
            }
        }
        // Leave: half the time cleanly, half by just exiting (the socket closes with the process).
        if rng.chance(0.5) {
            for probe in live { probe.invalidate() }
            report.linksClosed += live.count
        }
        for probe in live + closed { probe.tally(into: &report) }
        let json = try JSONEncoder().encode(report)
        FileHandle.standardOutput.write(json + Data("\n".utf8))
        Glibc.exit(0)
    }

    /// A random valid range: minimum ≤ preferred ≤ maximum (maximum 0: no bound).
    static func randomRange(_ rng: inout SplitMix64) -> FrameRateRange {
        let minimum = Float(Int.random(in: 0...120, using: &rng))
        let maximum = rng.chance(0.2) ? 0 : minimum + Float(Int.random(in: 0...150, using: &rng))
        let top = maximum > 0 ? maximum : 300
        let preferred = rng.chance(0.2) ? 0 : Float(Int.random(in: Int(minimum)...Int(top), using: &rng))
        return (try? FrameRateRange(minimum: minimum, maximum: maximum, preferred: preferred)) ?? .default
    }
}
