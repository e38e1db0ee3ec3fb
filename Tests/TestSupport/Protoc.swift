import Foundation

/// protoc (Debian's protobuf-compiler), for tests that decode the Perfetto traces the code
/// writes: with Perfetto's own definitions, or raw by field number.
public enum Protoc {
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// Runs protoc with `input` on its standard input; its text output.
    public static func run(_ arguments: [String], input: [UInt8]) throws -> String {
        guard let exe = ["/usr/bin/protoc", "/usr/local/bin/protoc"].first(where: { FileManager.default.isExecutableFile(atPath: $0) })
        else { throw Failure(description: "protoc not found: apt-get install protobuf-compiler (Scripts/test.sh installs it)") }
        let file = FileManager.default.temporaryDirectory.appendingPathComponent(
            "perfetto-\(getpid())-\(UInt64.random(in: 0...UInt64.max)).pftrace")
        try Data(input).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: exe)
        process.arguments = arguments
        process.standardInput = try FileHandle(forReadingFrom: file)
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let text = out.fileHandleForReading.readDataToEndOfFile()
        let errors = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw Failure(description: "protoc \(arguments.joined(separator: " ")): \(String(decoding: errors, as: UTF8.self))")
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// protoc's arguments to decode a whole trace with Perfetto's definitions (Tests/Perfetto/protos).
    public static var perfettoTraceArguments: [String] {
        let protos = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Perfetto/protos")
        return [
            "--decode=perfetto.protos.Trace", "-I", protos.path,
            protos.appendingPathComponent("frameworks_native_trace_packet.proto").path,
        ]
    }

    /// The top-level blocks opened by `opening` in protoc's text (`packet {` with the
    /// definitions, `1 {` raw), each as its inner lines.
    public static func packets(_ text: String, opening: String = "packet {") -> [[String]] {
        var packets: [[String]] = []
        for line in text.split(separator: "\n", omittingEmptySubsequences: true).map(String.init) {
            if line == opening { packets.append([]) } else if line != "}", !packets.isEmpty { packets[packets.count - 1].append(line) }
        }
        return packets
    }
}
