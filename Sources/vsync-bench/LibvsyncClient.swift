import Foundation
import ProcessTools

/// `--client-mode c`: Benchmarks/libvsync-client.c, compiled at run time with `cc -O2` against
/// include/ and the libvsync.so built next to vsync-bench, as a C program links the library.
enum LibvsyncClient {
    static func build(repository: String, library: String, workDir: String) throws -> String {
        let source = repository + "/Benchmarks/libvsync-client.c"
        guard FileManager.default.fileExists(atPath: source) else {
            throw BenchError("\(source) not found: run from the repository root")
        }
        guard FileManager.default.fileExists(atPath: library) else {
            throw BenchError("\(library) not found: build it first (swift build -c release --product vsync)")
        }
        // The program finds the library by its SONAME, as an installed one would be found.
        let lib = workDir + "/lib"
        try FileManager.default.createDirectory(atPath: lib, withIntermediateDirectories: true)
        try? FileManager.default.removeItem(atPath: lib + "/libvsync.so.1")
        try? FileManager.default.removeItem(atPath: lib + "/libvsync.so")
        try FileManager.default.createSymbolicLink(atPath: lib + "/libvsync.so.1", withDestinationPath: library)
        try FileManager.default.createSymbolicLink(atPath: lib + "/libvsync.so", withDestinationPath: library)
        let binary = workDir + "/libvsync-client"
        let log = workDir + "/cc-libvsync.log"
        let cc = try ChildProcess.spawn(
            "/usr/bin/env", ["cc", "-O2", "-I", repository + "/include", "-o", binary, source,
                             "-L", lib, "-lvsync", "-Wl,-rpath," + lib],
            stdoutPath: log, stderrPath: log, dieWithParent: false)
        guard cc.wait(seconds: 60) == 0 else {
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            throw BenchError("cc -O2 \(source) failed: \(text.prefix(400)); install a C compiler (apt-get install gcc)")
        }
        return binary
    }
}
