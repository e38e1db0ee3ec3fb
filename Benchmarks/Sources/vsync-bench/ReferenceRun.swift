// swift-format-ignore-file: AlwaysUseLowerCamelCase
// (the C reference's JSON keys, decoded by name)
import Foundation
import ProcessTools

/// The C floor: Benchmarks/reference/fanout.c, compiled with `cc -O2` at run time so its flags
/// are fixed and documented whatever the Swift build configuration, and so the reference stays a
/// single plain C file anyone can build and run by hand.
struct ReferenceRun {
    let binary: String
    /// The sender's scheduling (`--sender-sched`), the same as vsyncd's.
    var scheduling = SenderScheduling.unitDefault

    static func build(source: String, workDir: String) throws -> ReferenceRun {
        guard FileManager.default.fileExists(atPath: source) else {
            throw BenchError("C reference not found at \(source): run from the repository root or pass --reference-source")
        }
        let binary = workDir + "/fanout"
        let log = workDir + "/cc.log"
        let cc = try ChildProcess.spawn(
            "/usr/bin/env", ["cc", "-O2", "-o", binary, source],
            stdoutPath: log, stderrPath: log, dieWithParent: false)
        guard cc.wait(seconds: 60) == 0 else {
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            throw BenchError("cc -O2 \(source) failed: \(text.prefix(400)); install a C compiler (apt-get install gcc)")
        }
        return ReferenceRun(binary: binary)
    }

    /// fanout's JSON line.
    private struct Output: Decodable {
        var ticks: UInt64
        var samples: UInt64
        var p50_us: Double
        var p99_us: Double
        var p999_us: Double
        var max_us: Double
        var lost: UInt64
        var missed: UInt64
        var send_drops: UInt64
        var timer_overruns: UInt64
        var cpu_ns_per_tick: Double
        var rss_kib: Double
        var clients: Int
        var voluntary_switches_per_tick: Double
        var nonvoluntary_switches_per_tick: Double
    }

    /// `workNs` > 0 shifts the sender's timer by the work duration: the instants vsyncd wakes
    /// paced clients at, relative to the vblank grid (for a periodic timer, only a phase).
    /// `drain`: the clients drain to the newest tick, as vsyncd's do (the draining floor).
    func run(clients: Int, rate: Int, seconds: Double, warmup: Double, workNs: UInt64 = 0, drain: Bool = false, workDir: String) throws
        -> SideResult
    {
        let tag = "\(clients)-\(rate)\(drain ? "-drain" : "")"
        let out = workDir + "/fanout-\(tag).json"
        let err = workDir + "/fanout-\(tag).log"
        let child = try ChildProcess.spawn(
            binary,
            ["--clients", "\(clients)", "--rate", "\(rate)", "--seconds", "\(seconds)", "--warmup", "\(warmup)"]
                + (workNs > 0 ? ["--work-ns", "\(workNs)"] : []) + (drain ? ["--drain"] : [])
                + scheduling.fanoutArguments,
            stdoutPath: out, stderrPath: err)
        let status = child.wait(seconds: warmup + seconds + 60 + Double(clients) * 0.05)
        guard status == 0, let data = FileManager.default.contents(atPath: out),
            let o = try? JSONDecoder().decode(Output.self, from: data)
        else {
            let text = (try? String(contentsOfFile: err, encoding: .utf8)) ?? ""
            throw BenchError("C reference with \(clients) clients at \(rate) Hz failed (status \(status)): \(text.prefix(300))")
        }
        var notes: [String] = []
        if o.send_drops > 0 { notes.append("\(o.send_drops) sends found a full socket") }
        if o.timer_overruns > 0 { notes.append("sender woke over a period late \(o.timer_overruns) times (those periods count as lost)") }
        if o.missed > 0 { notes.append("\(o.missed) ticks sent were not received") }
        return SideResult(
            p50Us: o.p50_us, p99Us: o.p99_us, p999Us: o.p999_us, maxUs: o.max_us, samples: o.samples, lost: o.lost,
            cpuNsPerTick: o.cpu_ns_per_tick, rssMiB: o.rss_kib / 1024, ticks: o.ticks,
            clientsReporting: o.clients, wakeupsPerTick: o.voluntary_switches_per_tick,
            preemptionsPerTick: o.nonvoluntary_switches_per_tick, skipped: nil, notes: notes)
    }
}
