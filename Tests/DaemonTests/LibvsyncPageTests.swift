import Foundation
import Testing

/// libvsync's timing-page calls (protocol 5) through the real libvsync.so, and the software
/// vsync example, against page-check's stand-in daemon: a real sealed memfd page sent as
/// SCM_RIGHTS (Tests/libvsync/page-server.h), until vsyncd's own page is on this branch.
@Suite("libvsync timing page", .serialized)
struct LibvsyncPageTests {
    static let repository = LibvsyncTests.repository

    /// page-check built against the header and the library (gnu11: it uses the seqlock header's
    /// _Static_assert and Linux's seccomp, cmsg and memfd).
    static func pageCheck(in dir: URL) throws -> String {
        let output = dir.appendingPathComponent("page-check").path
        try LibvsyncTests.compile(repository.appendingPathComponent("Tests/libvsync/page-check.c"), to: output,
                                  extra: ["-std=gnu11", "-pthread"])
        return output
    }

    @Test(.timeLimit(.minutes(1)))
    func readsTheRecordWithNoSyscallAndSubscribesPageOnly() throws {
        let dir = try LibvsyncTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let check = try Self.pageCheck(in: dir)
        let result = try Command.run([check, "check", dir.appendingPathComponent("s.sock").path])
        #expect(result.status == 0 && result.output.contains("all passed"), "\(result.output)")
        #expect(!result.output.contains("FAIL"), "\(result.output)")
        // The strict-seccomp child read 10^5 times; its control, which dispatches, was stopped.
        #expect(result.output.contains("no syscall in 100000 reads"), "\(result.output)")
        #expect(result.output.contains("control with a dispatch was stopped"), "\(result.output)")
    }

    /// examples/vsync-phase.c, built as the README builds C programs (C99, -pedantic), aims its own
    /// timer at 30 consecutive predicted vblanks of a 60 Hz page, with one page-only link.
    @Test(.timeLimit(.minutes(1)))
    func theSoftwareVsyncExampleWakesBeforeEachVblank() throws {
        let dir = try LibvsyncTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let check = try Self.pageCheck(in: dir)
        let example = dir.appendingPathComponent("vsync-phase").path
        try LibvsyncTests.compile(Self.repository.appendingPathComponent("examples/vsync-phase.c"), to: example)
        let socket = dir.appendingPathComponent("p.sock").path
        // `read` waits for the server's "serving" line (it listens by then); `cat` keeps its last line.
        let result = try Command.run(["sh", "-c", "'\(check)' serve '\(socket)' 2 | { read first; echo \"$first\"; "
            + "'\(example)' --socket '\(socket)' --display 1 --frames 30 --margin-us 2000; echo \"example $?\"; cat; }"])
        #expect(result.output.contains("example 0"), "\(result.output)")
        let sequences = result.output.split(separator: "\n").filter { $0.hasPrefix("vblank ") }
            .compactMap { UInt64($0.split(separator: " ")[1]) }
        #expect(sequences.count == 30, "\(result.output)")
        // One wake per vblank, in order: a frame is never aimed at a vblank already past or twice.
        #expect(zip(sequences, sequences.dropFirst()).allSatisfy { $1 > $0 }, "\(sequences)")
        #expect(result.output.contains("30 wakes, 2000.0 us before each predicted vblank"), "\(result.output)")
        #expect(result.output.contains("served connections=1 subscribes=1 page_only=1"), "\(result.output)")
    }
}
