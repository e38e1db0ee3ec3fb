import Foundation
import Glibc
import Histogram
import ProcessTools

/// Our side of a cell: a real vsyncd on the timer source and N vsync-bench-client processes.
struct DaemonRun {
    let vsyncd: String
    let client: String
    let workDir: String
    /// Clients subscribe with this work duration (0: not paced).
    var workNs: UInt64 = 0
    /// vsyncd's scheduling (`--sender-sched`), as vsyncd.service sets it.
    var scheduling = SenderScheduling.unitDefault
    /// vsyncd's `--vblank-sampling`.
    var vblankSampling = "continuous"

    /// A running vsyncd with its clients; `stop()` ends them all.
    struct Session {
        let dir: String
        let daemon: ChildProcess
        var clients: [ChildProcess] = []
        var ready = Set<Int>()
        var readFD: Int32 = -1

        func stop() -> [String] {
            var notes: [String] = []
            for c in clients { c.signal(SIGKILL) }
            for c in clients { c.wait(seconds: 5) }
            let status = daemon.stop()
            if status != 0 { notes.append("vsyncd exited with status \(status) on SIGTERM (expected 0)") }
            if readFD >= 0 { close(readFD) }
            return notes
        }
    }

    /// Starts vsyncd, then `count` clients in `mode`, and waits (bounded) until each said it is live.
    func start(label: String, rate: Int, clients count: Int, mode: String) throws -> Session {
        let dir = workDir + "/\(label)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let socket = dir + "/vsyncd.sock"
        let log = dir + "/vsyncd.log"
        // The per-user caps (128 connections, 256 subscriptions) would refuse most of N clients
        // of one user: raised to N, so that the cell measures the N clients it names.
        let caps = [
            "--max-clients", "\(max(1024, count + 16))", "--max-clients-per-user", "\(max(128, count))",
            "--max-subscriptions-per-user", "\(max(256, count))",
        ]
        let daemon = try ChildProcess.spawn(
            vsyncd, ["--source", "timer:\(rate)", "--socket", socket, "--vblank-sampling", vblankSampling] + caps,
            stdoutPath: log, stderrPath: log)
        var session = Session(dir: dir, daemon: daemon)
        if let failure = scheduling.apply(to: daemon.pid) {
            _ = session.stop()
            throw BenchError(failure)
        }
        let deadline = Monotonic.seconds + 10
        while !FileManager.default.fileExists(atPath: socket) {
            if let status = daemon.poll() {
                throw BenchError("vsyncd exited (status \(status)) before creating \(socket): \(tail(log))")
            }
            guard Monotonic.seconds < deadline else {
                _ = session.stop()
                throw BenchError("vsyncd did not create \(socket) within 10 s: \(tail(log))")
            }
            usleep(10_000)
        }

        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { throw BenchError("pipe failed: \(String(cString: strerror(errno)))") }
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        var writeFD = fds[1]
        if writeFD == 3 {
            writeFD = fcntl(3, F_DUPFD_CLOEXEC, 10)
            close(3)
        }  // dup2(3, 3) would keep CLOEXEC
        session.readFD = fds[0]
        _ = fcntl(session.readFD, F_SETFL, O_NONBLOCK)

        let maxSeconds = 600 + count / 2
        for i in 0..<count {
            do {
                let c = try ChildProcess.spawn(
                    client,
                    ["--index", "\(i)", "--mode", mode, "--max-seconds", "\(maxSeconds)", "--window-file", dir + "/window"]
                        + (workNs > 0 ? ["--work-ns", "\(workNs)"] : []),
                    environment: ["VSYNCD_SOCKET": socket],
                    stdoutPath: dir + "/client-\(i).json", stderrPath: dir + "/clients.log",
                    inherit: [(writeFD, 3)])
                session.clients.append(c)
            } catch {
                close(writeFD)
                _ = session.stop()
                throw error
            }
            if i % 50 == 49 { readReady(&session) }
        }
        close(writeFD)

        // Swift processes take tens of ms of CPU each to start; 1000 of them share 2 cores.
        let readyDeadline = Monotonic.seconds + 30 + Double(count) * 0.1
        while session.ready.count < count && Monotonic.seconds < readyDeadline {
            var p = pollfd(fd: session.readFD, events: Int16(POLLIN), revents: 0)
            _ = Glibc.poll(&p, 1, 200)
            readReady(&session)
            if let status = daemon.poll() {
                _ = session.stop()
                throw BenchError("vsyncd exited (status \(status)) while \(count) clients connected: \(tail(log))")
            }
        }
        return session
    }

    private func readReady(_ session: inout Session) {
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = read(session.readFD, &buffer, buffer.count)
            guard n > 0 else { return }
            for line in String(decoding: buffer[0..<n], as: UTF8.self).split(separator: "\n") {
                if let i = Int(line) { session.ready.insert(i) }
            }
        }
    }

    /// One measured cell: `seconds` of ticks after `warmup`, clients recording the same window.
    /// `clientMode`: "tick" (DisplayLink callbacks) or "raw" (plain blocking recv, like the C clients).
    func run(clients count: Int, rate: Int, seconds: Double, warmup: Double, clientMode: String) throws -> SideResult {
        var session = try start(label: "ours-\(clientMode)-\(count)-\(rate)", rate: rate, clients: count, mode: clientMode)
        var notes: [String] = []
        if session.ready.count < count {
            notes.append("only \(session.ready.count) of \(count) clients got a first tick in time")
        }
        usleep(UInt32(warmup * 1e6))

        guard var before = ProcSample.read(pid: session.daemon.pid) else {
            notes += session.stop()
            throw BenchError("vsyncd died during warm-up: \(tail(session.dir + "/vsyncd.log"))")
        }
        // The clients record only ticks stamped inside one window, as the C floor's clients
        // record the ticks its sender flags: it opens 100 ms after SIGUSR1 and SIGUSR2 comes
        // 100 ms after it closes, so no client records while the others reset their histograms
        // or exit (a burst of 100 processes on 2 CPUs that stalled the last ones 30-120 ms).
        let windowStart = Monotonic.nanoseconds + 100_000_000
        let windowEnd = windowStart + UInt64(seconds * 1e9)
        try "\(windowStart) \(windowEnd)\n".write(toFile: session.dir + "/window", atomically: true, encoding: .utf8)
        for c in session.clients { c.signal(SIGUSR1) }
        sleepUntil(windowStart)
        before = ProcSample.read(pid: session.daemon.pid) ?? before
        let t0 = Monotonic.seconds
        var peakRSS = before.rssKiB
        var after = before
        while Monotonic.nanoseconds < windowEnd {
            usleep(UInt32(min(250_000, (windowEnd &- min(windowEnd, Monotonic.nanoseconds)) / 1000)))
            guard let s = ProcSample.read(pid: session.daemon.pid) else { break }
            peakRSS = max(peakRSS, s.rssKiB)
            after = s
        }
        let t1 = Monotonic.seconds
        if let s = ProcSample.read(pid: session.daemon.pid) {
            after = s
            peakRSS = max(peakRSS, s.rssKiB)
        } else {
            notes.append("vsyncd died during the run: \(tail(session.dir + "/vsyncd.log"))")
        }
        sleepUntil(windowEnd + 100_000_000)  // ticks stamped before the end still on their way
        for c in session.clients { c.signal(SIGUSR2) }

        // Collect the clients' reports (bounded), then stop everything.
        let collectDeadline = Monotonic.seconds + 20 + Double(count) * 0.02
        var merged = Histogram<UInt64>.latency()
        var read = Histogram<UInt64>.latency()
        var reports = 0
        var lost: UInt64 = 0
        var skipped: UInt64 = 0
        var clientNotes = Set<String>()
        for (i, c) in session.clients.enumerated() {
            c.wait(seconds: max(0.1, collectDeadline - Monotonic.seconds))
            guard let data = FileManager.default.contents(atPath: session.dir + "/client-\(i).json"),
                let line = data.split(separator: 0x0A).last,
                let report = try? JSONDecoder().decode(ClientReport.self, from: Data(line))
            else { continue }
            reports += 1
            lost += report.lost
            skipped += report.skipped
            for pair in report.latencyNs where pair.count == 2 { _ = merged.record(pair[0], count: pair[1]) }
            for pair in report.readLatencyNs ?? [] where pair.count == 2 { _ = read.record(pair[0], count: pair[1]) }
            clientNotes.formUnion(report.notes)
        }
        session.clients.removeAll()
        notes += session.stop()
        if reports < count { notes.append("\(count - reports) of \(count) clients did not report") }
        notes += clientNotes.sorted().prefix(5).map { "client: \($0)" }

        let ticks = UInt64(((t1 - t0) * Double(rate)).rounded())
        let perTick = { (delta: UInt64) in ticks > 0 ? Double(delta) / Double(ticks) : 0 }
        return SideResult(
            p50Us: merged.microseconds(atPercentile: 50), p99Us: merged.microseconds(atPercentile: 99),
            p999Us: merged.microseconds(atPercentile: 99.9),
            maxUs: Double(merged.max) / 1000, samples: merged.totalCount, lost: lost,
            cpuNsPerTick: perTick(after.cpuNs &- before.cpuNs), rssMiB: Double(peakRSS) / 1024, ticks: ticks,
            clientsReporting: reports, clientsLive: session.ready.count,
            wakeupsPerTick: perTick(after.voluntarySwitches &- before.voluntarySwitches),
            preemptionsPerTick: perTick(after.nonvoluntarySwitches &- before.nonvoluntarySwitches),
            skipped: skipped, notes: notes,
            readP50Us: read.totalCount > 0 ? read.microseconds(atPercentile: 50) : nil)
    }

    /// vsyncd's wake-ups while nobody needs ticks.
    struct IdleResult: Codable {
        var phase: String
        var clients: Int
        var seconds: Double
        var wakeupsPerSecond: Double
        var cpuMsPerSecond: Double
        var rssMiB: Double
        var met: Bool
        var notes: [String]
    }

    func idle(phase: String, mode: String?, clients count: Int, rate: Int, seconds: Double) throws -> IdleResult {
        let n = mode == nil ? 0 : count
        let session = try start(label: "idle-\(phase)", rate: rate, clients: n, mode: mode ?? "connect")
        var notes: [String] = []
        if session.ready.count < n { notes.append("only \(session.ready.count) of \(n) clients were live in time") }
        usleep(2_000_000)  // let subscriptions and the handshake traffic settle
        guard let before = ProcSample.read(pid: session.daemon.pid) else {
            _ = session.stop()
            throw BenchError("vsyncd died before the idle window: \(tail(session.dir + "/vsyncd.log"))")
        }
        let t0 = Monotonic.seconds
        usleep(UInt32(seconds * 1e6))
        let after = ProcSample.read(pid: session.daemon.pid)
        let elapsed = Monotonic.seconds - t0
        notes += session.stop()
        guard let after else { throw BenchError("vsyncd died during the idle window: \(tail(session.dir + "/vsyncd.log"))") }
        let wakeups = Double(after.contextSwitches &- before.contextSwitches) / elapsed
        return IdleResult(
            phase: phase, clients: n, seconds: elapsed, wakeupsPerSecond: wakeups,
            cpuMsPerSecond: Double(after.cpuNs &- before.cpuNs) / 1e6 / elapsed,
            rssMiB: Double(max(before.rssKiB, after.rssKiB)) / 1024, met: wakeups <= 1.0, notes: notes)
    }
}

/// The last few hundred characters of a log, for error lines.
/// Sleeps until CLOCK_MONOTONIC reaches `ns` (at once if it has).
func sleepUntil(_ ns: UInt64) {
    var ts = timespec(tv_sec: Int(ns / 1_000_000_000), tv_nsec: Int(ns % 1_000_000_000))
    while clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nil) == EINTR {}
}

func tail(_ path: String) -> String {
    guard let text = try? String(contentsOfFile: path, encoding: .utf8), !text.isEmpty else { return "(no log)" }
    return String(text.suffix(400)).replacingOccurrences(of: "\n", with: " | ")
}
