import Foundation
import ProcessTools

/// `--page-read`: Benchmarks/page-read.c, built at run time with `cc -O2` against include/ and the
/// libvsync.so next to vsync-bench, times vsync_display_timing (the timing page read) against
/// clock_gettime in alternating rounds. Without `--page-read-socket` it reads a page it makes
/// itself (Tests/libvsync/page-server.h's stand-in daemon, labelled so in its output).
enum PageRead {
    static func run(repository: String, library: String, workDir: String, rounds: Int, calls: Int, socket: String?) throws {
        let source = repository + "/Benchmarks/page-read.c"
        guard FileManager.default.fileExists(atPath: source) else {
            throw BenchError("\(source) not found: run from the repository root")
        }
        guard FileManager.default.fileExists(atPath: library) else {
            throw BenchError("\(library) not found: build it first (swift build -c release --product vsync)")
        }
        // The program finds the library by its SONAME, as an installed one would be found.
        let lib = workDir + "/lib"
        try FileManager.default.createDirectory(atPath: lib, withIntermediateDirectories: true)
        for name in ["libvsync.so.1", "libvsync.so"] {
            try? FileManager.default.removeItem(atPath: lib + "/" + name)
            try FileManager.default.createSymbolicLink(atPath: lib + "/" + name, withDestinationPath: library)
        }
        let binary = workDir + "/page-read"
        let log = workDir + "/cc-page-read.log"
        let cc = try ChildProcess.spawn(
            "/usr/bin/env", ["cc", "-O2", "-std=gnu11", "-pthread", "-I", repository + "/include", "-I", repository + "/Tests/libvsync",
                             "-o", binary, source, "-L", lib, "-lvsync", "-Wl,-rpath," + lib],
            stdoutPath: log, stderrPath: log, dieWithParent: false)
        guard cc.wait(seconds: 60) == 0 else {
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            throw BenchError("cc -O2 \(source) failed: \(text.prefix(400)); install a C compiler (apt-get install gcc)")
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = ["\(rounds)", "\(calls)"] + (socket.map { [$0] } ?? [])
        try process.run()  // its output is the report, on our stdout
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw BenchError("page-read failed (status \(process.terminationStatus))") }
    }
}
