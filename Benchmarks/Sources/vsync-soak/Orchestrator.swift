import Foundation
import Glibc
import ProcessTools

/// Runs vsyncd and keeps `clients` worker processes alive for the soak's duration, watching
/// vsyncd's fds and RSS every second; then stops everything and judges the run.
struct Orchestrator {
    let options: Run
    let vsyncd: String
    let soak: String
    let seed: UInt64
    let signals: sigset_t

    private var rng: SplitMix64
    private var summary = SoakSummary()
    private var dir = ""
    private var daemon: ChildProcess?
    private var workers: [Int: RunningWorker] = [:]
    private var nextIndex = 0

    struct RunningWorker {
        let process: ChildProcess
        let steady: Bool
        let reportPath: String
        var killed = false
    }

    init(options: Run, vsyncd: String, soak: String, seed: UInt64, signals: sigset_t) {
        self.options = options
        self.vsyncd = vsyncd
        self.soak = soak
        self.seed = seed
        self.signals = signals
        rng = SplitMix64(seed: seed)
    }

    /// Warm-up before RSS counts: the first tenth of the run, 5 s to 60 s.
    var warmup: Double { min(60, max(5, options.seconds / 10)) }

    mutating func run() throws -> SoakSummary {
        summary.seconds = options.seconds
        summary.hertz = options.hz
        summary.clients = options.clients
        summary.seed = seed
        summary.fdSlack = options.fdSlack
        summary.rssGrowthBoundKiB = options.rssBoundKib
        summary.warmupSeconds = warmup

        var template = Array("/tmp/vsync-soak-XXXXXX".utf8CString)
        guard template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) != nil else {
            throw SoakError("could not create a directory in /tmp: \(String(cString: strerror(errno)))")
        }
        dir = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        defer { stopEverything() }

        let socket = dir + "/vsyncd.sock"
        let log = dir + "/vsyncd.log"
        let d = try ChildProcess.spawn(
            vsyncd, ["--source", "timer:\(options.hz)", "--socket", socket, "--log-level", "warning"],
            stdoutPath: log, stderrPath: log)
        daemon = d
        try waitUntilListening(socket, daemon: d, log: log)
        // Let the probe connection's disconnect land before taking the baseline.
        usleep(300_000)
        summary.fdBaseline = ProcReadings.openFDs(d.pid) ?? 0

        let steadyCount = max(1, options.clients / 10)
        for i in 0..<options.clients { try startWorker(steady: i < steadyCount, socket: socket) }

        let start = Monotonic.seconds
        let end = start + options.seconds
        var nextSample = start
        var afterWarmup: [Int] = []
        var interrupted = false
        let killChance = options.killEvery > 0 ? 0.1 / options.killEvery : 0
        while Monotonic.seconds < end {
            if Signals.wait(signals, seconds: 0.1) != nil {
                interrupted = true
                break
            }
            if let status = d.poll() {
                daemon = nil
                summary.daemonExitStatus = status
                summary.failures.append("vsyncd exited with status \(status) after \(Int(Monotonic.seconds - start)) s: \(tail(log))")
                break
            }
            try reapWorkers(replace: true, socket: socket)
            if rng.chance(killChance) { killRandomChurner() }
            let now = Monotonic.seconds
            if now >= nextSample {
                nextSample += 1
                if let fds = ProcReadings.openFDs(d.pid), let rss = ProcReadings.residentKiB(d.pid) {
                    record(fds: fds, rss: rss)
                    if now - start >= warmup {
                        if afterWarmup.isEmpty { summary.rssAfterWarmupKiB = rss }
                        afterWarmup.append(rss)
                    }
                }
            }
        }
        if interrupted { summary.failures.append("interrupted by a signal before the end") }

        // Everyone leaves: SIGTERM makes each worker report and exit.
        for w in workers.values { w.process.signal(SIGTERM) }
        let leaveDeadline = Monotonic.seconds + 15
        while !workers.isEmpty && Monotonic.seconds < leaveDeadline {
            try reapWorkers(replace: false, socket: socket)
            usleep(20_000)
        }
        for (index, w) in workers {
            _ = w.process.wait(seconds: 0)
            summary.workerCrashes += 1
            summary.failures.append("worker \(index) did not exit within 15 s of SIGTERM")
        }
        workers = [:]

        if daemon != nil {
            // vsyncd notices the closed connections on its next loop turn: give it a moment.
            let fdDeadline = Monotonic.seconds + 5
            var fds = ProcReadings.openFDs(d.pid) ?? 0
            while abs(fds - summary.fdBaseline) > options.fdSlack && Monotonic.seconds < fdDeadline {
                usleep(50_000)
                fds = ProcReadings.openFDs(d.pid) ?? fds
            }
            if let rss = ProcReadings.residentKiB(d.pid) {
                record(fds: fds, rss: rss)
                if !afterWarmup.isEmpty { afterWarmup.append(rss) }
            }
            summary.fdDelta = fds - summary.fdBaseline
            summary.daemonRunningAtEnd = d.poll() == nil
            if summary.daemonRunningAtEnd {
                d.signal(SIGTERM)
                summary.daemonExitStatus = d.wait(seconds: 10)
            }
            daemon = nil
        }
        if let first = afterWarmup.first, let top = afterWarmup.max() { summary.rssGrowthKiB = top - first }
        judge(log: log)
        // Logs are kept for a failure worth reading (not the self-test's expected one).
        if summary.passed || options.injectLoss { try? FileManager.default.removeItem(atPath: dir) }
        return summary
    }

    private mutating func record(fds: Int, rss: Int) {
        if summary.samples == 0 {
            summary.fdFirst = fds
            summary.rssFirstKiB = rss
        }
        summary.samples += 1
        summary.fdLast = fds
        summary.fdMax = max(summary.fdMax, fds)
        summary.rssLastKiB = rss
        summary.rssMaxKiB = max(summary.rssMaxKiB, rss)
    }

    private mutating func judge(log: String) {
        if !summary.daemonRunningAtEnd, summary.failures.allSatisfy({ !$0.hasPrefix("vsyncd exited") }) {
            summary.failures.append("vsyncd was not running at the end")
        }
        if summary.daemonRunningAtEnd, summary.daemonExitStatus != 0 {
            summary.failures.append("vsyncd exited with status \(summary.daemonExitStatus) on SIGTERM (expected 0): \(tail(log))")
        }
        if summary.violations > 0 {
            summary.failures.append("\(summary.violations) tick-stream violations, e.g. \(summary.violationSamples.first ?? "")")
        }
        // A keeps-up link's skip that neither vsyncd nor the link waiting for a CPU explains is
        // vsyncd passing a vblank over while it could run; one in a hundred due frames fails.
        if summary.keepUpUnexplained * 100 > summary.keepUpFrames + summary.keepUpSkipped {
            summary.failures.append(
                "keeps-up links skipped \(summary.keepUpUnexplained) of \(summary.keepUpFrames + summary.keepUpSkipped) frames while neither vsyncd nor the link waited for a CPU, e.g. \(summary.keepUpUnexplainedSamples.first ?? "")"
            )
        }
        if summary.linkErrors > 0 {
            summary.failures.append("\(summary.linkErrors) DisplayLink errors, e.g. \(summary.linkErrorSamples.first ?? "")")
        }
        if summary.workerCrashes > 0, !summary.failures.contains(where: { $0.hasPrefix("worker") }) {
            summary.failures.append("\(summary.workerCrashes) workers crashed or exited without a report (logs in \(dir))")
        }
        if abs(summary.fdDelta) > options.fdSlack {
            summary.failures.append(
                "vsyncd has \(summary.fdDelta) fds more than its baseline \(summary.fdBaseline) after all clients left (allowed ±\(options.fdSlack))"
            )
        }
        if summary.rssGrowthKiB > options.rssBoundKib {
            summary.failures.append("vsyncd's RSS grew \(summary.rssGrowthKiB) KiB after warm-up (allowed \(options.rssBoundKib) KiB)")
        }
        if summary.ticks == 0 { summary.failures.append("no client received a tick") }
        summary.passed = summary.failures.isEmpty
        if !summary.passed && !options.injectLoss { summary.failures.append("logs kept in \(dir)") }
    }

    private mutating func startWorker(steady: Bool, socket: String) throws {
        let index = nextIndex
        nextIndex += 1
        // Steady workers stay for the whole run; churners leave after 1 s to 20 s.
        let lifetime = steady ? options.seconds + 60 : Double.random(in: 1...max(2, min(20, options.seconds / 2)), using: &rng)
        let reportPath = dir + "/worker-\(index).json"
        let process = try ChildProcess.spawn(
            soak,
            [
                "worker", "--socket", socket, "--seed", "\(rng.next())", "--index", "\(index)",
                "--role", steady ? "steady" : "churn", "--lifetime", "\(lifetime)", "--hz", "\(options.hz)",
                "--daemon-pid", "\(daemon?.pid ?? 0)",
            ]
                + (options.injectLoss ? ["--inject-loss"] : []),
            stdoutPath: reportPath, stderrPath: dir + "/workers.log")
        workers[index] = RunningWorker(process: process, steady: steady, reportPath: reportPath)
        summary.workersStarted += 1
        summary.joins += 1
    }

    private mutating func killRandomChurner() {
        let churners = workers.filter { !$0.value.steady && !$0.value.killed }.map(\.key)
        guard let index = churners.randomElement(using: &rng) else { return }
        workers[index]!.killed = true
        workers[index]!.process.signal(SIGKILL)
    }

    /// Collects workers that exited, adds their reports, and starts replacements.
    private mutating func reapWorkers(replace: Bool, socket: String) throws {
        for (index, w) in workers {
            guard let status = w.process.poll() else { continue }
            workers[index] = nil
            summary.leaves += 1
            if w.killed {
                summary.workersKilled += 1
            } else if status == 0, let report = readReport(w.reportPath) {
                summary.workersLeft += 1
                add(report)
            } else if !replace, status == 128 + SIGTERM {
                // Started just before the end: SIGTERM came before it blocked the signal.
                summary.workersStoppedEarly += 1
            } else {
                summary.workerCrashes += 1
                if summary.workerCrashes <= 3 {
                    summary.failures.append("worker \(index) exited with status \(status) and no report (see \(dir)/workers.log)")
                }
            }
            try? FileManager.default.removeItem(atPath: w.reportPath)
            if replace { try startWorker(steady: w.steady, socket: socket) }
        }
    }

    private func readReport(_ path: String) -> WorkerReport? {
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        return try? JSONDecoder().decode(WorkerReport.self, from: data)
    }

    private mutating func add(_ r: WorkerReport) {
        summary.workersReported += 1
        summary.ticks += r.frames
        summary.checkedPairs += r.checkedPairs
        summary.skipped += r.skipped
        summary.keepUpFrames += r.keepUpFrames
        summary.keepUpSkipped += r.keepUpSkipped
        summary.keepUpCheckedPairs += r.keepUpCheckedPairs
        summary.keepUpUnexplained += r.keepUpUnexplained
        for u in r.keepUpUnexplainedSamples where summary.keepUpUnexplainedSamples.count < 10 {
            summary.keepUpUnexplainedSamples.append("worker \(r.index): \(u)")
        }
        summary.linksOpened += r.linksOpened
        summary.linksClosed += r.linksClosed
        summary.pauses += r.pauses
        summary.resumes += r.resumes
        summary.rateChanges += r.rateChanges
        summary.slowSpells += r.slowSpells
        summary.violations += r.violations
        for v in r.violationSamples where summary.violationSamples.count < 10 {
            summary.violationSamples.append("worker \(r.index): \(v)")
        }
        summary.linkErrors += r.errors
        for e in r.errorSamples where summary.linkErrorSamples.count < 10 {
            summary.linkErrorSamples.append("worker \(r.index): \(e)")
        }
    }

    private func waitUntilListening(_ socket: String, daemon: ChildProcess, log: String) throws {
        let deadline = Monotonic.seconds + 10
        while Monotonic.seconds < deadline {
            if let status = daemon.poll() {
                throw SoakError("vsyncd exited with status \(status) before listening on \(socket): \(tail(log))")
            }
            if Self.canConnect(socket) { return }
            usleep(20_000)
        }
        throw SoakError("vsyncd did not listen on \(socket) within 10 s: \(tail(log))")
    }

    private static func canConnect(_ path: String) -> Bool {
        let fd = socket(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, b) in path.utf8.prefix(raw.count - 1).enumerated() { raw[i] = b }
        }
        return withUnsafePointer(to: &address) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        } == 0
    }

    /// Kills whatever is still running: workers first, then vsyncd (early exits and errors).
    private mutating func stopEverything() {
        for w in workers.values { w.process.signal(SIGKILL) }
        for w in workers.values { _ = w.process.wait(seconds: 5) }
        workers = [:]
        if let d = daemon {
            d.signal(SIGTERM)
            _ = d.wait(seconds: 5)
            daemon = nil
        }
    }

    private func tail(_ path: String) -> String {
        let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
        let lines = text.split(separator: "\n").suffix(3)
        return lines.isEmpty ? "(empty log)" : lines.joined(separator: " | ")
    }
}

extension SoakSummary {
    /// The human-readable summary.
    var text: String {
        func mib(_ kib: Int) -> String { String(format: "%.1f MiB", Double(kib) / 1024) }
        var lines = [
            "vsync-soak: \(Int(seconds)) s at \(hertz) Hz, \(clients) clients, seed \(seed): \(passed ? "PASS" : "FAIL")",
            "  workers: \(workersStarted) started, \(workersLeft) left by themselves, \(workersKilled) SIGKILLed, \(workersStoppedEarly) stopped before joining, \(workerCrashes) crashed",
            "  joins \(joins), leaves \(leaves), links opened \(linksOpened), closed \(linksClosed)",
            "  pauses \(pauses), resumes \(resumes), rate changes \(rateChanges), slow-handler spells \(slowSpells)",
            "  ticks \(ticks), pairs checked \(checkedPairs), violations \(violations), link errors \(linkErrors), skipped \(skipped)",
            "  keeps-up links: \(keepUpFrames) ticks, \(keepUpSkipped) skipped (\(keepUpUnexplained) while neither vsyncd nor the link waited for a CPU), \(keepUpCheckedPairs) pairs checked",
            "  vsyncd fds: baseline \(fdBaseline), first \(fdFirst), max \(fdMax), after all left \(fdLast) (Δ \(fdDelta), allowed ±\(fdSlack))",
            "  vsyncd RSS: first \(mib(rssFirstKiB)), after \(Int(warmupSeconds)) s warm-up \(mib(rssAfterWarmupKiB)), max \(mib(rssMaxKiB)), last \(mib(rssLastKiB)); growth after warm-up \(rssGrowthKiB) KiB (allowed \(rssGrowthBoundKiB) KiB)",
            "  vsyncd: running at the end \(daemonRunningAtEnd), exit status on SIGTERM \(daemonExitStatus)",
        ]
        for v in violationSamples { lines.append("  violation: \(v)") }
        for e in linkErrorSamples { lines.append("  link error: \(e)") }
        for u in keepUpUnexplainedSamples { lines.append("  unexplained skip: \(u)") }
        for f in failures { lines.append("  FAIL: \(f)") }
        return lines.joined(separator: "\n")
    }
}
