import ArgumentParser
import Dispatch
import Foundation
import Glibc
import ProcessTools

@main
struct VsyncBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "vsync-bench",
        abstract: "Measure vsyncd + DisplayLink against the C fan-out floor.",
        discussion: """
            For each (clients, rate): starts vsyncd --source timer:RATE on a private socket and N \
            vsync-bench-client processes linking DisplayLink, measures callback latency (entry time \
            minus tick timestamp, CLOCK_MONOTONIC), lost ticks, daemon CPU per tick and RSS, then runs \
            Benchmarks/reference/fanout.c (built with cc -O2) with the same N and rate. \
            See docs/PERFORMANCE.md.
            """)

    @Option(help: "Comma-separated client counts.") var clients = "1,10,100,1000"
    @Option(help: "Comma-separated tick rates in Hz.") var rates = "60,240"
    @Option(help: "Measured seconds per run.") var seconds: Double = 10
    @Option(help: "Seconds of ticks before measuring, on both sides.") var warmup: Double = 1
    @Option(
        help:
            "Rounds per cell. Ours and C alternate (ours first in odd rounds, C first in even ones) so drift in the machine's load hits both; each figure is then the median over rounds (max and RSS: the largest; lost, ticks, samples: the sum)."
    )
    var rounds = 1
    @Flag(help: "Print one JSON object per line instead of tables.") var json = false
    @Option(help: "The vsyncd binary (default: next to vsync-bench, else the product package's build of the same configuration).")
    var vsyncd: String?
    @Option(help: "The vsync-bench-client binary (default: next to vsync-bench).") var client: String?
    @Option(help: "fanout.c, the C reference.") var referenceSource: String?
    @Flag(help: "Measure vsyncd's wake-ups with clients connected but unsubscribed, and all paused, instead of the matrix.")
    var idle = false
    @Option(help: "Clients for --idle.") var idleClients = 100
    @Option(help: "Seconds per --idle phase.") var idleSeconds: Double = 10
    @Flag(help: "Run only the C reference (to calibrate a machine).") var referenceOnly = false
    @Option(
        help:
            "Our clients: 'callback' (DisplayLink on a dispatch queue, the product), 'direct' (DisplayLink.start(): the handler on the library's reader thread), 'c' (a C program in libvsync's dispatch loop; Benchmarks/libvsync-client.c, built at run time against libvsync.so), 'raw' (blocking recv on a plain socket like the C clients, to isolate the daemon's share) or 'page' (the C program with a page-only link: woken by libvsync's own timer aimed from vsyncd's timing page, no tick; needs --work-duration)."
    )
    var clientMode = "callback"
    @Option(
        help:
            "Frame pacing: our clients subscribe with this work duration in ms and are measured from the wake instant the daemon aims at (targetTimestamp − W), the C floor's timer is shifted by W and measured from its deadline. 0: not paced."
    )
    var workDuration: Double = 0
    @Option(
        help:
            "How both senders are scheduled, vsyncd and the C floor's (their clients keep the bench's): 'rr:PRIO' or 'fifo:PRIO' (real-time, needs root), 'other:NICE', or 'other'. The default is vsyncd.service's, rr:1."
    )
    var senderSched = "rr:1"
    @Flag(help: "Keep the work directory (logs, client reports).") var keep = false
    @Option(help: "vsyncd's --vblank-sampling: continuous, or sparse (ticks from its model between bursts).")
    var vblankSampling = "continuous"
    @Flag(
        help:
            "Instead of the matrix: ns per call of libvsync's vsync_display_timing (the timing page read) next to clock_gettime's, --rounds alternating rounds (Benchmarks/page-read.c, built at run time against libvsync.so)."
    )
    var pageRead = false
    @Option(help: "Calls per round for --page-read.") var pageReadCalls = 1_000_000
    @Option(
        help:
            "--page-read against this running vsyncd's page; without it, the bench starts vsyncd --source timer:60 (--vsyncd) and reads its page."
    )
    var pageReadSocket: String?

    mutating func run() throws {
        guard ["callback", "direct", "c", "raw", "page"].contains(clientMode) else {
            throw ValidationError("--client-mode is 'callback', 'direct', 'c', 'raw' or 'page'")
        }
        if clientMode == "page" && workDuration <= 0 {
            throw ValidationError("--client-mode page paces clients from the timing page: give it --work-duration MS")
        }
        let counts = try Self.list(clients, "--clients")
        let hzs = try Self.list(rates, "--rates")
        guard seconds > 0, warmup >= 0 else { throw ValidationError("--seconds must be > 0 and --warmup ≥ 0") }
        guard rounds >= 1 else { throw ValidationError("--rounds must be ≥ 1") }
        guard workDuration >= 0 && workDuration <= 1000 else { throw ValidationError("--work-duration must be 0 to 1000 ms") }
        let workNs = UInt64((workDuration * 1e6).rounded())
        Self.raiseFileLimit(clients: counts.max() ?? 0)
        let workDir = try Self.makeWorkDir()
        let cleanup = Self.installCleanup(removing: keep ? nil : workDir)
        defer { withExtendedLifetime(cleanup) {} }
        defer {
            ChildProcess.killAll()
            if !keep { try? FileManager.default.removeItem(atPath: workDir) }
        }
        let binDir = Self.executableDirectory()
        if pageRead {
            guard pageReadCalls >= 1000 else { throw ValidationError("--page-read-calls must be ≥ 1000") }
            try PageRead.run(
                repository: Self.repositoryRoot(), library: MainPackageBuild.product("libvsync.so"), workDir: workDir,
                rounds: rounds, calls: pageReadCalls, socket: pageReadSocket, vsyncd: vsyncd ?? MainPackageBuild.product("vsyncd"))
            return
        }
        var clientBinary = client ?? binDir + "/vsync-bench-client"
        if (clientMode == "c" || clientMode == "page") && !referenceOnly && !idle {
            clientBinary = try LibvsyncClient.build(
                repository: Self.repositoryRoot(), library: MainPackageBuild.product("libvsync.so"), workDir: workDir)
        }
        guard let scheduling = SenderScheduling(senderSched) else {
            throw ValidationError("--sender-sched is rr:PRIO or fifo:PRIO (1-99), other:NICE (-20-19) or other")
        }
        let ours = DaemonRun(
            vsyncd: vsyncd ?? MainPackageBuild.product("vsyncd"), client: clientBinary, workDir: workDir, workNs: workNs,
            scheduling: scheduling, vblankSampling: vblankSampling)
        if !referenceOnly || idle {
            for path in [ours.vsyncd, ours.client] where !FileManager.default.isExecutableFile(atPath: path) {
                throw BenchError("\(path) is not an executable: build it first (swift build -c release) or pass --vsyncd/--client")
            }
        }
        Self.log(
            "vsync-bench: \(Machine.summary); senders at \(scheduling); clients: \(clientMode)\(workNs > 0 ? ", work duration \(workDuration) ms" : ""); work dir \(workDir)"
        )

        if idle {
            var rows: [DaemonRun.IdleResult] = []
            for (phase, mode) in [("no clients", nil), ("connected, not subscribed", "connect"), ("all paused", "paused")]
                as [(String, String?)]
            {
                Self.log("idle: \(phase) …")
                let r = try ours.idle(phase: phase, mode: mode, clients: idleClients, rate: hzs.first ?? 60, seconds: idleSeconds)
                if json { try emit(r) }
                rows.append(r)
            }
            if !json { print(ResultTable.renderIdle(rows)) }
            return
        }

        var reference = try ReferenceRun.build(source: referenceSource ?? Self.defaultReferenceSource(), workDir: workDir)
        reference.scheduling = scheduling
        var cells: [CellResult] = []
        for n in counts {
            for hz in hzs {
                var cell = CellResult(clients: n, rate: hz, seconds: seconds, rounds: rounds)
                var oursRounds: [SideResult] = []
                var referenceRounds: [SideResult] = []
                var drainingRounds: [SideResult] = []
                let (clientMode, referenceOnly, seconds, warmup) = (self.clientMode, self.referenceOnly, self.seconds, self.warmup)
                for round in 0..<rounds {
                    let tag = rounds > 1 ? " (round \(round + 1) of \(rounds))" : ""
                    let runOurs = {
                        guard !referenceOnly else { return }
                        let kind =
                            clientMode == "raw"
                            ? "raw socket"
                            : clientMode == "c"
                                ? "libvsync (C)" : clientMode == "page" ? "libvsync (C) page-paced" : "DisplayLink (\(clientMode))"
                        Self.log("N=\(n) @ \(hz) Hz\(tag): vsyncd + \(kind) clients …")
                        do {
                            oursRounds.append(
                                try ours.run(
                                    clients: n, rate: hz, seconds: seconds, warmup: warmup,
                                    clientMode: clientMode == "callback" ? "tick" : clientMode))
                        } catch { Self.log("N=\(n) @ \(hz) Hz: ours failed: \(error)") }
                    }
                    let runReference = {
                        Self.log("N=\(n) @ \(hz) Hz\(tag): C reference …")
                        do {
                            referenceRounds.append(
                                try reference.run(clients: n, rate: hz, seconds: seconds, warmup: warmup, workNs: workNs, workDir: workDir))
                        } catch { Self.log("N=\(n) @ \(hz) Hz: reference failed: \(error)") }
                        Self.log("N=\(n) @ \(hz) Hz\(tag): C reference, clients draining to the newest tick …")
                        do {
                            drainingRounds.append(
                                try reference.run(
                                    clients: n, rate: hz, seconds: seconds, warmup: warmup, workNs: workNs, drain: true, workDir: workDir))
                        } catch { Self.log("N=\(n) @ \(hz) Hz: draining reference failed: \(error)") }
                    }
                    if round % 2 == 0 {
                        runOurs()
                        runReference()
                    } else {
                        runReference()
                        runOurs()
                    }
                }
                cell.ours = SideResult.combining(oursRounds)
                cell.reference = SideResult.combining(referenceRounds)
                cell.referenceDraining = SideResult.combining(drainingRounds)
                cell.evaluate()
                if json { try emit(cell) }
                cells.append(cell)
            }
        }
        if !json {
            print(ResultTable.render(cells))
            let targets = cells.flatMap(\.targets)
            if !targets.isEmpty {
                print(workNs > 0 ? "Targets (work duration \(workDuration) ms: latency from the wake instant):" : "Targets:")
                for t in targets { print("  " + t.line) }
            }
            let notes = cells.flatMap { c in
                (c.ours?.notes ?? []).map { "N=\(c.clients) @ \(c.rate) Hz ours: \($0)" }
                    + (c.reference?.notes ?? []).map { "N=\(c.clients) @ \(c.rate) Hz C: \($0)" }
            }
            if !notes.isEmpty { print("Notes:\n" + notes.map { "  " + $0 }.joined(separator: "\n")) }
        }
    }

    private func emit<T: Encodable>(_ value: T) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        var line = try encoder.encode(value)
        line.append(0x0A)
        FileHandle.standardOutput.write(line)
    }

    private static func log(_ line: String) {
        FileHandle.standardError.write(Data((line + "\n").utf8))
    }

    static func list(_ text: String, _ name: String) throws -> [Int] {
        let values = text.split(separator: ",").map { Int($0.trimmingCharacters(in: .whitespaces)) }
        guard !values.isEmpty, values.allSatisfy({ ($0 ?? 0) > 0 }) else {
            throw ValidationError("\(name) takes positive integers separated by commas, e.g. 1,10,100")
        }
        return values.compactMap { $0 }
    }

    /// 1000 clients need 1000+ fds in vsyncd; children inherit the raised soft limit.
    static func raiseFileLimit(clients: Int) {
        var rl = rlimit()
        guard getrlimit(RLIMIT_NOFILE_ENUM, &rl) == 0 else { return }
        let want = rlim_t(clients * 2 + 256)
        if rl.rlim_cur < want {
            rl.rlim_cur = min(rl.rlim_max, max(want, rl.rlim_cur))
            _ = setrlimit(RLIMIT_NOFILE_ENUM, &rl)
        }
        if rl.rlim_cur < want {
            FileHandle.standardError.write(
                Data("vsync-bench: open-file limit \(rl.rlim_cur) is below \(want) for \(clients) clients: raise it (ulimit -n)\n".utf8))
        }
    }

    /// SIGINT/SIGTERM: kill every child before exiting. Keep the sources alive for the run.
    static func installCleanup(removing workDir: String?) -> [any DispatchSourceSignal] {
        var sources: [any DispatchSourceSignal] = []
        for signo in [SIGINT, SIGTERM, SIGHUP] {
            signal(signo, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signo, queue: .global())
            source.setEventHandler {
                ChildProcess.killAll()
                if let workDir { try? FileManager.default.removeItem(atPath: workDir) }
                Glibc.exit(128 + signo)
            }
            source.resume()
            sources.append(source)
        }
        signal(SIGPIPE, SIG_IGN)
        return sources
    }

    static func makeWorkDir() throws -> String {
        var template = Array((NSTemporaryDirectory() + "vsync-bench.XXXXXX").utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw BenchError("mkdtemp in \(NSTemporaryDirectory()) failed: \(String(cString: strerror(errno)))")
        }
        return String(cString: made)
    }

    static func executableDirectory() -> String {
        let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        return (exe as NSString).deletingLastPathComponent
    }

    /// Benchmarks/reference/fanout.c in the source tree this binary was built from, else under the
    /// current directory.
    static func defaultReferenceSource() -> String { repositoryRoot() + "/Benchmarks/reference/fanout.c" }

    /// The source tree this binary was built from, else the current directory.
    static func repositoryRoot() -> String {
        let fromSource = MainPackageBuild.repositoryRoot
        if FileManager.default.fileExists(atPath: fromSource.appendingPathComponent("Benchmarks/reference/fanout.c").path) {
            return fromSource.path
        }
        return FileManager.default.currentDirectoryPath
    }
}

/// Glibc imports RLIMIT_NOFILE as an enum case on Linux.
// swift-format-ignore: AlwaysUseLowerCamelCase
let RLIMIT_NOFILE_ENUM = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
