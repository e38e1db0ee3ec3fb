import Foundation
import ProcessTools

/// `--client-mode c`: Benchmarks/libvsync-client.c, compiled at run time with `cc -O2` against
/// include/ and the libvsync.so built next to vsync-bench, as a C program links the library.
enum LibvsyncClient {
    static func build(repository: String, library: String, workDir: String) throws -> String {
        try compile("Benchmarks/libvsync-client.c", to: "libvsync-client", repository: repository, library: library, workDir: workDir)
    }

    /// Compiles the C program at `source` (relative to the repository) with `cc -O2` against
    /// include/ and `library`, linked by its SONAME through `workDir`/lib as an installed library
    /// would be found; returns the binary's path. `--page-read`'s program is built the same way.
    static func compile(
        _ source: String, to name: String, extraFlags: [String] = [], repository: String,
        library: String, workDir: String
    ) throws -> String {
        let source = repository + "/" + source
        guard FileManager.default.fileExists(atPath: source) else {
            throw BenchError("\(source) not found: run from the repository root")
        }
        guard FileManager.default.fileExists(atPath: library) else {
            throw BenchError("\(library) not found: build it first (swift build -c release --product vsync)")
        }
        let lib = workDir + "/lib"
        try FileManager.default.createDirectory(atPath: lib, withIntermediateDirectories: true)
        for link in ["libvsync.so.1", "libvsync.so"] {
            try? FileManager.default.removeItem(atPath: lib + "/" + link)
            try FileManager.default.createSymbolicLink(atPath: lib + "/" + link, withDestinationPath: library)
        }
        let binary = workDir + "/" + name
        let log = workDir + "/cc-\(name).log"
        let cc = try ChildProcess.spawn(
            "/usr/bin/env",
            ["cc", "-O2"] + extraFlags + [
                "-I", repository + "/include", "-o", binary, source,
                "-L", lib, "-lvsync", "-Wl,-rpath," + lib,
            ],
            stdoutPath: log, stderrPath: log, dieWithParent: false)
        guard cc.wait(seconds: 60) == 0 else {
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            throw BenchError("cc -O2 \(source) failed: \(text.prefix(400)); install a C compiler (apt-get install gcc)")
        }
        return binary
    }
}
