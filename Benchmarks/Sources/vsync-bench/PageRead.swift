import Foundation
import ProcessTools

/// `--page-read`: Benchmarks/page-read.c, built at run time with `cc -O2` against include/ and the
/// libvsync.so next to vsync-bench, times vsync_display_timing (the timing page read) against
/// clock_gettime in alternating rounds, on the page of a vsyncd it starts (timer source, 60 Hz)
/// or, with `--page-read-socket`, of one already running.
enum PageRead {
    static func run(
        repository: String, library: String, workDir: String, rounds: Int, calls: Int, socket: String?,
        vsyncd: String
    ) throws {
        let binary = try LibvsyncClient.compile(
            "Benchmarks/page-read.c", to: "page-read", extraFlags: ["-std=gnu11", "-pthread", "-I", repository + "/Tests/libvsync"],
            repository: repository, library: library, workDir: workDir)
        var path = socket ?? ""
        var daemon: ChildProcess?
        if socket == nil {
            guard FileManager.default.isExecutableFile(atPath: vsyncd) else {
                throw BenchError("\(vsyncd) is not an executable: build it first (swift build -c release) or pass --vsyncd")
            }
            path = workDir + "/page-read.sock"
            let daemonLog = workDir + "/vsyncd-page-read.log"
            daemon = try ChildProcess.spawn(
                vsyncd, ["--source", "timer:60", "--socket", path], stdoutPath: daemonLog, stderrPath: daemonLog)
            let deadline = Date().addingTimeInterval(10)
            while !FileManager.default.fileExists(atPath: path) {
                guard Date() < deadline, daemon?.poll() == nil else {
                    throw BenchError("vsyncd did not listen on \(path) within 10 s: see \(daemonLog)")
                }
                usleep(10_000)
            }
        }
        defer { _ = daemon?.stop() }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = ["\(rounds)", "\(calls)", path]
        try process.run()  // its output is the report, on our stdout
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw BenchError("page-read failed (status \(process.terminationStatus))") }
    }
}
