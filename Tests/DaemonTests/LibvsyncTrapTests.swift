import Foundation
import Testing
import VsyncClientCore
import VsyncCore

/// The C API's former traps (calls that misled their first users), each held by a test: Tests/libvsync/traps.c drives the
/// library through its ABI against the real vsyncd on the timer source, and prints what happened.
@Suite("libvsync traps", .serialized)
struct LibvsyncTrapTests {
    /// traps.c, built once per test against the repository's header and the built library.
    static func traps(in dir: URL) throws -> String {
        let binary = dir.appendingPathComponent("traps").path
        try LibvsyncTests.compile(LibvsyncTests.repository.appendingPathComponent("Tests/libvsync/traps.c"), to: binary,
                                  extra: ["-pthread"])
        return binary
    }

    static func lines(_ output: String) -> [String] { output.split(separator: "\n").map(String.init) }

    /// Negative errno values: -EINVAL for a bad range, and strerror(-rc) says "Invalid argument"
    /// (the old VSYNC_EINVAL was 10, ECHILD). The header's numbers are checked against <errno.h>
    /// by traps.c's static asserts: it would not compile otherwise.
    @Test(.timeLimit(.minutes(1)))
    func callsFailWithNegativeErrnoThatStrerrorNames() throws {
        let daemon = try DaemonProcess(hertz: 60, logLevel: "warning")
        defer { daemon.stop() }
        let result = try LibvsyncTests.run([try Self.traps(in: daemon.directory), "errno", daemon.socketPath])
        let lines = Self.lines(result.output)
        #expect(result.status == 0, "\(result.output)")
        #expect(lines.contains("set_rate rc=-\(EINVAL) errno-name=EINVAL strerror=Invalid argument"), "\(lines)")
        #expect(lines.contains { $0.hasPrefix("last=vsync_link_set_rate: ") }, "\(lines)")
        #expect(lines.contains("work_duration rc=-\(EINVAL) strerror=Invalid argument"), "\(lines)")
        #expect(lines.contains("connect rc=-\(ECONNREFUSED) is-ECONNREFUSED=1 strerror=Connection refused"), "\(lines)")
        // Another errno gets the C library's own text.
        #expect(lines.contains("vsync_strerror(-EPIPE)=Broken pipe"), "\(lines)")
    }

    /// Two threads connecting at once each read their own failure, never the other's (the old
    /// last error was one process-wide buffer).
    @Test(.timeLimit(.minutes(1)))
    func theLastConnectErrorIsPerThread() throws {
        let dir = try LibvsyncTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let result = try LibvsyncTests.run([try Self.traps(in: dir), "threads", dir.path])
        #expect(result.status == 0 && result.output.contains("threads mismatches=0,0"), "\(result.output)")
    }

    /// link_create and the setters return why they failed, and the client's last error says it
    /// in a line; a link whose client was destroyed answers -ENOTCONN instead of touching it.
    @Test(.timeLimit(.minutes(1)))
    func failuresCarryAReason() throws {
        let daemon = try DaemonProcess(hertz: 60, logLevel: "warning")
        defer { daemon.stop() }
        let result = try LibvsyncTests.run([try Self.traps(in: daemon.directory), "failures", daemon.socketPath])
        let lines = Self.lines(result.output)
        #expect(result.status == 0, "\(result.output)")
        #expect(lines.contains { $0.hasPrefix("create crtc:x rc=-\(EINVAL) link=null last=vsync_link_create: 'crtc:x': expected a number above 0") }, "\(lines)")
        #expect(lines.contains("create crtc:0 rc=-\(EINVAL) link=null"), "\(lines)")
        #expect(lines.contains("create out=NULL rc=-\(EINVAL)"), "\(lines)")
        #expect(lines.contains("set_display_callback NULL rc=-\(EINVAL)"), "\(lines)")
        #expect(lines.contains("set_error_callback NULL rc=-\(EINVAL)"), "\(lines)")
        #expect(lines.contains("create primary rc=0 link=set"), "\(lines)")
        #expect(lines.contains("set_display_callback live rc=0"), "\(lines)")
        let dead = -ENOTCONN
        #expect(lines.contains("dead set_rate rc=\(dead) set_paused rc=\(dead) set_error_callback rc=\(dead) max_fps rc=\(dead)"), "\(lines)")
    }

    /// Every destroy order, under valgrind: links after their client (what a Python finalizer or
    /// a Rust Drop may do), links before it, a link destroying itself and another from its
    /// callback, and the client destroyed from a callback. Any read of freed memory fails.
    @Test(.timeLimit(.minutes(3)), arguments: ["client-first", "links-first", "in-callback", "client-in-callback"])
    func everyDestroyOrderIsSafeUnderValgrind(order: String) throws {
        let daemon = try DaemonProcess(hertz: 60, logLevel: "warning")
        defer { daemon.stop() }
        let traps = try Self.traps(in: daemon.directory)
        // Valgrind 3.19 cannot read the DWARF 5 of Swift's debug build: it gets a copy without
        // debug info, found first through LD_LIBRARY_PATH (the rpath is a RUNPATH).
        let stripped = daemon.directory.appendingPathComponent("stripped")
        try FileManager.default.createDirectory(at: stripped, withIntermediateDirectories: true)
        let strip = try LibvsyncTests.run(["objcopy", "--strip-debug", try LibvsyncTests.library(),
                                           stripped.appendingPathComponent("libvsync.so.1").path])
        try #require(strip.status == 0, "\(strip.output)")
        let result = try LibvsyncTests.run(["valgrind", "-q", "--error-exitcode=99", "--leak-check=full",
                                            "--errors-for-leak-kinds=definite", traps, "destroy", order, daemon.socketPath],
                                           environment: ["LD_LIBRARY_PATH": stripped.path])
        #expect(result.status == 0, "valgrind: \(result.output)")
        #expect(!result.output.contains("Invalid read") && !result.output.contains("Invalid write"), "\(result.output)")
        let lines = Self.lines(result.output)
        switch order {
        case "client-first":
            #expect(lines.contains("dead set_rate rc=-\(ENOTCONN) get_refresh rc=-\(ENOTCONN)"), "\(lines)")
            #expect(lines.contains { $0.hasPrefix("destroy client-first a=") && !$0.hasSuffix("a=0") }, "\(lines)")
        case "links-first":
            #expect(lines.contains { $0.hasPrefix("destroy links-first a=") && !$0.hasSuffix("a=0") }, "\(lines)")
        case "in-callback":
            #expect(lines.contains("destroy in-callback a=2 more=2"), "\(lines)")
        default:
            #expect(lines.contains("destroy client-in-callback client=destroyed a=2"), "\(lines)")
            #expect(lines.contains("dead set_rate rc=-\(ENOTCONN)"), "\(lines)")
        }
    }

    /// dispatch(-1) on a paused link (no tick coming) with a SIGALRM handler installed with
    /// SA_RESTART: the signal ends the wait. Before, the kernel restarted the blocking recvmmsg
    /// and the program waited until killed; `timeout` stands in for that kill here.
    @Test(.timeLimit(.minutes(1)))
    func aSignalWithSARestartEndsTheWait() throws {
        let daemon = try DaemonProcess(hertz: 60, logLevel: "warning")
        defer { daemon.stop() }
        let traps = try Self.traps(in: daemon.directory)
        let result = try LibvsyncTests.run(["timeout", "-s", "KILL", "20", traps, "signal", daemon.socketPath])
        #expect(result.status == 0, "exit \(result.status) (9, killed: dispatch(-1) never returned): \(result.output)")
        #expect(result.output.contains("dispatch returned rc=0 alarms=1"), "\(result.output)")
        #expect(result.output.contains("refresh=60000"), "the link never got its SUBSCRIBED: \(result.output)")
    }

    /// The displays vsyncd has, with id, name, refresh, state and what identity the protocol carries.
    @Test(.timeLimit(.minutes(1)))
    func displaysAreListed() throws {
        let daemon = try DaemonProcess(hertz: 60, logLevel: "warning")
        defer { daemon.stop() }
        let result = try LibvsyncTests.run([try Self.traps(in: daemon.directory), "displays", daemon.socketPath])
        let lines = Self.lines(result.output)
        #expect(result.status == 0, "\(result.output)")
        #expect(lines.contains("count 1"), "\(lines)")
        let display = try #require(lines.first { $0.hasPrefix("display ") }, "\(lines)")
        let synthetic = DisplayFlags.synthetic.union(.primary).rawValue
        #expect(display.contains("name=timer state=1 flags=\(synthetic) refresh_mhz=60000 period_ns=16666667"), "\(display)")
        // The timer source has no card, bus or EDID.
        #expect(display.contains("device=[] bus=[] make=[] model=[] serial=[] struct_size=392 generation=0 residual_samples=0"), "\(display)")
        // 0.3.0's struct size still works, and only its bytes are written.
        #expect(lines.contains("old element rc=1 struct_size=360 untouched=1"), "\(lines)")
        #expect(lines.contains("small element rc=-\(EINVAL)"), "\(lines)")
    }

    @Test func versionMacrosMatchTheReleaseAndTheLibrary() throws {
        let dir = try LibvsyncTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let result = try LibvsyncTests.run([try Self.traps(in: dir), "version"])
        let parts = VsyncVersion.string.split(separator: ".").compactMap { Int($0) }
        try #require(parts.count == 3)
        let encoded = String(format: "0x%06x", parts[0] << 16 | parts[1] << 8 | parts[2])
        #expect(result.output == "header \(VsyncVersion.string) \(encoded) library \(encoded)\n", "\(result.output)")
    }
}
