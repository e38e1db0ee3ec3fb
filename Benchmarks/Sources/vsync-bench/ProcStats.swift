import Foundation

/// What the bench reads about the daemon from /proc.
///
/// CPU: the sum of every thread's `sum_exec_runtime` (first field of
/// /proc/PID/task/TID/schedstat, in ns): the same quantity the C reference reads with
/// CLOCK_PROCESS_CPUTIME_ID, so the ratio compares like with like. utime+stime from
/// /proc/PID/stat is kept alongside, but it counts in 10 ms jiffies, too coarse for
/// tens of microseconds per tick over a few seconds.
struct ProcSample {
    var cpuNs: UInt64 = 0
    var jiffies: UInt64 = 0
    var rssKiB: UInt64 = 0
    /// Context switches summed over the threads. Voluntary ones are the daemon blocking (one per
    /// wake-up); nonvoluntary ones are it being preempted, mostly by the clients it just woke.
    var voluntarySwitches: UInt64 = 0
    var nonvoluntarySwitches: UInt64 = 0
    var contextSwitches: UInt64 { voluntarySwitches + nonvoluntarySwitches }
    var threads = 0

    static func read(pid: pid_t) -> ProcSample? {
        guard let stat = text("/proc/\(pid)/stat"), let status = text("/proc/\(pid)/status") else { return nil }
        var s = ProcSample()
        // Fields after the ")" that closes comm: state is field 3, utime 14, stime 15.
        if let close = stat.lastIndex(of: ")") {
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            if fields.count > 12 { s.jiffies = (UInt64(fields[11]) ?? 0) + (UInt64(fields[12]) ?? 0) }
        }
        s.rssKiB = field(status, "VmRSS:") ?? 0
        let tids = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        for tid in tids {
            if let sched = text("/proc/\(pid)/task/\(tid)/schedstat"),
                let first = sched.split(separator: " ").first, let ns = UInt64(first)
            {
                s.cpuNs += ns
            }
            if let ts = text("/proc/\(pid)/task/\(tid)/status") {
                s.voluntarySwitches += field(ts, "voluntary_ctxt_switches:") ?? 0
                s.nonvoluntarySwitches += field(ts, "nonvoluntary_ctxt_switches:") ?? 0
            }
            s.threads += 1
        }
        return s
    }

    private static func text(_ path: String) -> String? { try? String(contentsOfFile: path, encoding: .utf8) }

    private static func field(_ text: String, _ name: String) -> UInt64? {
        for line in text.split(separator: "\n") where line.hasPrefix(name) {
            return UInt64(line.dropFirst(name.count).split(whereSeparator: { $0 == " " || $0 == "\t" }).first ?? "")
        }
        return nil
    }
}

/// The machine, for docs/PERFORMANCE.md.
enum Machine {
    static var summary: String {
        let cpuinfo = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? ""
        let model =
            cpuinfo.split(separator: "\n").first { $0.hasPrefix("model name") }
            .map { $0.split(separator: ":", maxSplits: 1).last.map { $0.trimmingCharacters(in: .whitespaces) } ?? "" } ?? "unknown CPU"
        var uts = utsname()
        uname(&uts)
        let release = withUnsafeBytes(of: &uts.release) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        return "\(ProcessInfo.processInfo.activeProcessorCount) CPUs, \(model), Linux \(release)"
    }
}
