import Foundation

/// Runs a program to completion through /usr/bin/env (so a bare name is looked up on PATH),
/// with `environment` added to the test's own; its exit status and stdout and stderr together.
enum Command {
    static func run(_ arguments: [String], environment: [String: String] = [:]) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = environment.map { "\($0.key)=\($0.value)" }.sorted() + arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }
}
