import ArgumentParser
import Foundation
import VsyncDRM

/// Expected failures end with one line on stderr saying what to do, and exit status 1:
/// never a crash trace.
enum Failure {
    static func exit(_ message: String) -> ExitCode {
        FileHandle.standardError.write(Data("vsync-probe: \(message)\n".utf8))
        return ExitCode(1)
    }

    static func exit(_ error: DRMError) -> ExitCode { exit(error.description) }
}

enum Output {
    /// Unbuffered, so a reader (or a test syncing on it) sees each line at once.
    static func line(_ text: String) {
        FileHandle.standardOutput.write(Data((text + "\n").utf8))
    }

    static func json<T: Encodable>(_ value: T) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let data = try encoder.encode(value)
        line(String(decoding: data, as: UTF8.self))
    }
}
