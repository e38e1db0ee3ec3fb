import ArgumentParser
import FoundationEssentials
import Glibc
import VsyncDRM

/// Expected failures end with one line on stderr saying what to do, and exit status 1:
/// never a crash trace.
enum Failure {
    static func exit(_ message: String) -> ExitCode {
        Output.error("vsync-probe: \(message)")
        return ExitCode(1)
    }

    static func exit(_ error: DRMError) -> ExitCode { exit(error.description) }
}

enum Output {
    /// Unbuffered, so a reader (or a test syncing on it) sees each line at once.
    static func line(_ text: String) { write(text, to: 1) }

    static func error(_ text: String) { write(text, to: 2) }

    /// The whole line in one write(2) where it fits, retried on a short write or EINTR.
    private static func write(_ text: String, to fd: Int32) {
        var bytes = Array((text + "\n").utf8)
        bytes.withUnsafeMutableBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let n = Glibc.write(fd, buffer.baseAddress! + offset, buffer.count - offset)
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else { return }
                offset += n
            }
        }
    }

    static func json<T: Encodable>(_ value: T) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let data = try encoder.encode(value)
        line(String(decoding: data, as: UTF8.self))
    }
}
