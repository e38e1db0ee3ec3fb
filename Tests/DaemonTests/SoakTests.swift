import Foundation
import Glibc
import Testing

/// The soak's CI version (vsync-soak is built by `swift build --package-path Benchmarks`): `vsync-soak --seconds 30 --hz 240 --clients 50` against the built
/// vsyncd. The checks on the tick streams, fds and RSS run inside vsync-soak (its workers
/// check every tick); this test asserts its verdict and that the figures it reports describe
/// a run that really did what it says.
@Suite("Soak")
struct SoakTests {
    /// The figures of vsync-soak's `--json` summary that the test asserts.
    struct Figures: Decodable {
        var passed: Bool
        var failures: [String]
        var seconds: Double
        var hertz: Double
        var clients: Int
        var workersStarted: Int
        var workersKilled: Int
        var workerCrashes: Int
        var ticks: Int
        var checkedPairs: Int
        var joins: Int
        var leaves: Int
        var linksOpened: Int
        var pauses: Int
        var resumes: Int
        var rateChanges: Int
        var violations: Int
        var linkErrors: Int
        var keepUpFrames: Int
        var keepUpSkipped: Int
        var keepUpCheckedPairs: Int
        var keepUpUnexplained: Int
        var daemonRunningAtEnd: Bool
        var daemonExitStatus: Int32
        var fdBaseline: Int
        var fdMax: Int
        var fdDelta: Int
        var fdSlack: Int
        var rssGrowthKiB: Int
        var rssGrowthBoundKiB: Int
        var rssMaxKiB: Int
        var samples: Int
    }

    static let seconds = 30
    static let hertz = 240
    static let clients = 50

    /// Runs vsync-soak with `arguments` + `--json`, bounded; its exit status and summary.
    func soak(_ arguments: [String], seconds: Int) throws -> (status: Int32, figures: Figures, text: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try DaemonProcess.binary("vsync-soak"))
        // This build's vsyncd: the soak, from the Benchmarks package, has none beside it.
        process.arguments = arguments + ["--vsyncd", try DaemonProcess.binary("vsyncd"), "--json"]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        // Bounded: the soak stops its clients within ~20 s of its end; past that it is stuck.
        let pid = process.processIdentifier
        let watchdog = DispatchWorkItem { kill(pid, SIGINT) }
        DispatchQueue.global().asyncAfter(deadline: .now() + .seconds(seconds + 90), execute: watchdog)
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        watchdog.cancel()
        let text = String(decoding: data, as: UTF8.self)
        guard let figures = try? JSONDecoder().decode(Figures.self, from: data) else {
            throw HarnessError("vsync-soak exited with status \(process.terminationStatus) and printed no JSON summary: \(text)")
        }
        return (process.terminationStatus, figures, text)
    }

    @Test func thirtySecondsAt240HzWith50ChurningClients() throws {
        let (status, figures, text) = try soak(
            ["--seconds", "\(Self.seconds)", "--hz", "\(Self.hertz)", "--clients", "\(Self.clients)"], seconds: Self.seconds)
        #expect(status == 0, "vsync-soak failed: \(figures.failures)")
        #expect(figures.passed && figures.failures.isEmpty, "\(figures.failures)")

        // The run was the one asked for, and it churned.
        #expect(figures.seconds == Double(Self.seconds) && figures.hertz == Double(Self.hertz) && figures.clients == Self.clients)
        #expect(figures.joins > Self.clients, "no client left and was replaced: \(text)")
        #expect(figures.leaves == figures.joins, "every client that joined left by the end")
        #expect(figures.workersKilled > 0 && figures.pauses > 0 && figures.resumes > 0 && figures.rateChanges > 0)
        #expect(figures.linksOpened > figures.joins, "no client opened an extra link")

        // No crash, and a clean exit on SIGTERM.
        #expect(figures.daemonRunningAtEnd && figures.daemonExitStatus == 0)
        #expect(figures.workerCrashes == 0 && figures.linkErrors == 0)

        // No lost tick: every gap in every checked stream was counted in `skipped`.
        #expect(figures.violations == 0)
        #expect(figures.checkedPairs * 2 > figures.ticks, "too few tick pairs were checked: \(figures.checkedPairs) of \(figures.ticks)")
        // The clients that keep up (one in ten, full rate, fast handler) got their ticks: at
        // least 80% of what 240 Hz gives after a 5 s start, delivered or counted as skipped.
        let steady = max(1, Self.clients / 10)
        let due = Double(steady * Self.hertz * (Self.seconds - 5)) * 0.8
        #expect(Double(figures.keepUpFrames + figures.keepUpSkipped) >= due, "keeps-up links: \(figures.keepUpFrames) ticks, \(figures.keepUpSkipped) skipped")
        // How many they skip is the machine's doing as much as vsyncd's: on 2 cores shared with
        // compilers, vsyncd and the clients wait for a CPU for frames at a time (a third of the
        // frames under load 12). A skip counts against vsyncd only when neither it nor the link
        // waited for a CPU half of each frame skipped (the kernel's schedstat says): about 0.1 %
        // of due frames under that load. Sharp only on a quiet machine: under load, vsyncd's
        // waits are so common that they excuse most skips, its own included.
        #expect(figures.keepUpUnexplained * 100 <= figures.keepUpFrames + figures.keepUpSkipped,
                "keeps-up links skipped \(figures.keepUpUnexplained) of \(figures.keepUpFrames + figures.keepUpSkipped) frames while neither vsyncd nor the link waited for a CPU")
        #expect(figures.keepUpCheckedPairs * 10 >= figures.keepUpFrames * 9)

        // No fd or memory growth, measured while the clients were really connected.
        #expect(figures.samples >= Self.seconds - 2)
        #expect(figures.fdMax > figures.fdBaseline + Self.clients / 2, "fd samples never saw the clients")
        #expect(abs(figures.fdDelta) <= figures.fdSlack)
        #expect(figures.rssMaxKiB > 0 && figures.rssGrowthKiB <= figures.rssGrowthBoundKiB)
    }

    /// The checks can fail: workers that hide one tick in 100 from their own checks (as if the
    /// daemon had lost it without counting it) must make the soak report violations and exit 1.
    @Test func aTickLostUncountedFailsTheSoak() throws {
        let (status, figures, _) = try soak(["--seconds", "5", "--clients", "4", "--inject-loss"], seconds: 5)
        #expect(status == 1)
        #expect(!figures.passed)
        #expect(figures.violations > 0)
        #expect(figures.failures.contains { $0.contains("tick-stream violations") })
    }
}
