import ArgumentParser
import Foundation
import Glibc
import ProcessTools

@main
struct VsyncSoak: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "vsync-soak",
        abstract: "Soak vsyncd: many DisplayLink clients that join, leave, pause and change rates at random.",
        subcommands: [Run.self, Worker.self],
        defaultSubcommand: Run.self)
}

/// The orchestrator's options; `vsync-soak [options]` runs this.
struct Run: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the soak (the default command); exits 0 if every check passed, 1 otherwise.")

    @Option(help: "How long to soak, in seconds.") var seconds = 600.0
    @Option(help: "The timer source's rate.") var hz = 240.0
    @Option(help: "Client processes kept alive.") var clients = 50
    @Option(help: "Seed for every random choice (default: from the clock, printed in the summary).") var seed: UInt64?
    @Flag(help: "Print the summary as one JSON object.") var json = false
    @Option(help: "The vsyncd binary (default: the one next to vsync-soak, else the product package's build of the same configuration).")
    var vsyncd: String?
    @Option(help: "Largest allowed growth of vsyncd's RSS after warm-up, in KiB.") var rssBoundKib = 2048
    @Option(help: "Largest allowed difference of vsyncd's fd count from its baseline after all clients left.") var fdSlack = 2
    @Option(help: "Mean seconds between SIGKILLs of a random churning client (0: none).") var killEvery = 2.0
    @Flag(help: "Self-test: workers hide one tick in 100 from their checks, so the run must fail with violations.")
    var injectLoss = false

    func validate() throws {
        guard seconds >= 5 else { throw ValidationError("--seconds must be at least 5") }
        guard hz >= 1, hz <= 1000 else { throw ValidationError("--hz must be between 1 and 1000") }
        guard clients >= 1, clients <= 500 else { throw ValidationError("--clients must be between 1 and 500") }
    }

    func run() throws {
        let signals = Signals.block([SIGINT, SIGTERM])
        let here = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        let daemon = vsyncd ?? MainPackageBuild.product("vsyncd")
        guard FileManager.default.isExecutableFile(atPath: daemon) else {
            throw SoakError("no vsyncd at \(daemon): build it with 'swift build' in the repository root or pass --vsyncd PATH")
        }
        var orchestrator = Orchestrator(
            options: self, vsyncd: daemon, soak: here.path,
            seed: seed ?? Monotonic.nanoseconds, signals: signals)
        let summary = try orchestrator.run()
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            FileHandle.standardOutput.write(try encoder.encode(summary) + Data("\n".utf8))
        } else {
            print(summary.text)
        }
        if !summary.passed { throw ExitCode(1) }
    }
}
