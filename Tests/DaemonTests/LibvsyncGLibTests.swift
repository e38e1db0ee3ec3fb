import Foundation
import Glibc
import Testing
import VsyncClientCore
import VsyncCore

/// The GLib adapter (include/vsync/vsync-glib.h) with Debian's GLib, against the real vsyncd on
/// its timer source: Tests/libvsync/glib-check.c runs a vsync source on a GMainContext iterated
/// by a thread of its own, and its frames are compared with the ticks a raw subscriber got.
@Suite("libvsync GLib source", .serialized)
struct LibvsyncGLibTests {
    /// Not 60 Hz: a source that fell back to a 60 Hz timer would show it in every interval.
    static let hertz = 75

    /// As vsync.h: C99 and C++ with every warning an error, so it fits any GLib program.
    @Test func theHeaderCompilesCleanlyAsC99AndCxx() throws {
        let dir = try LibvsyncTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let source = dir.appendingPathComponent("h.c")
        try "#include <vsync/vsync-glib.h>\nint main(void) { return vsync_error_quark() == 0; }\n"
            .write(to: source, atomically: true, encoding: .utf8)
        let flags = try AdapterCheck.pkgConfig(["glib-2.0"])
        for (compiler, standard) in [("cc", "-std=c99"), ("c++", "-std=c++11")] {
            var arguments = [compiler, standard, "-Wall", "-Wextra", "-Werror", "-pedantic", "-I",
                             LibvsyncTests.repository.appendingPathComponent("include").path]
            if compiler == "c++" { arguments += ["-x", "c++"] }
            let result = try Command.run(arguments + [source.path, "-c", "-o", dir.appendingPathComponent("h.o").path] + flags)
            #expect(result.status == 0, "\(compiler) \(standard): \(result.output)")
        }
    }

    @Test(.timeLimit(.minutes(2)))
    func framesAreVsyncdsTicksAndThePausedSourceLeavesTheLoopAsleep() throws {
        let daemon = try DaemonProcess(hertz: Double(Self.hertz), logLevel: "warning")
        defer { daemon.stop() }
        let check = try AdapterCheck.build("glib-check.c", modules: ["glib-2.0"], in: daemon.directory)
        let ticks = try RawClient(path: daemon.socketPath)
        try ticks.handshake(version: 4)
        let display = try ticks.subscribe(1, fps: Self.hertz, selector: .connector("timer"))
        let frameCount = 30, window = 40
        let run = try AdapterCheck.run([check, daemon.socketPath, "\(frameCount)", "\(window)"], recording: ticks)
        let output = run.output
        #expect(run.status == 0, "\(output)")

        // Failures come back as a GError in VSYNC_ERROR with the errno and libvsync's line, and
        // leave no fd behind.
        let missing = "/nonexistent/vsyncd.sock"
        #expect(output.contains("no daemon: source=null domain=1 code=\(ECONNREFUSED) message=\(ClientError.noDaemon(socketPath: missing).description)\n"),
                "\(output)")
        #expect(output.contains("bad selector: source=null code=\(EINVAL) message=vsync_link_create: 'crtc:0'"), "\(output)")
        let failures = try #require(AdapterCheck.records(output, prefix: "fds after failures").first, "\(output)")
        #expect(failures["before"] != nil && failures["before"] == failures["after"], "\(failures)")

        // The frames: one per vblank at the display's rate, each the tick vsyncd sent for it.
        let frames = AdapterCheck.frames(output)
        #expect(frames.count == frameCount, "\(output)")
        AdapterCheck.expectFramesAreVsyncdsTicks(frames, run.ticks)
        for f in frames {
            #expect(f.display == display.displayID && f.durationNs == display.displayIntervalNs, "\(f.fields)")
            #expect(f.int("divisor") == 1 && f.int("interval") == Int64(display.displayIntervalNs), "\(f.fields)")
        }
        #expect(output.contains("frames=\(frameCount) late=0 user_data=ok"), "\(output)")

        // Paused, the source's fd stays silent and nothing else of it wakes the loop.
        #expect(output.contains("settled displays=1 "), "\(output)")
        AdapterCheck.expectIdle(output, vblanks: window)

        // Finalize closed what the source opened.
        let fds = try #require(AdapterCheck.records(output, prefix: "fds: ").first, "\(output)")
        let before = try #require(fds["before"].flatMap(Int.init)), running = try #require(fds["running"].flatMap(Int.init))
        #expect(running > before && fds["after"] == fds["before"], "\(fds)")
    }

    /// examples/vsync-glib.c built the README's way against an install (vsync-glib.pc brings
    /// GLib's flags), at a third of the display's rate.
    @Test(.timeLimit(.minutes(2)))
    func theExampleBuildsFromItsPkgConfigFileAndTicks() throws {
        let daemon = try DaemonProcess(hertz: Double(Self.hertz), logLevel: "warning")
        defer { daemon.stop() }
        let prefix = try AdapterCheck.install(into: daemon.directory)
        let lib = prefix.appendingPathComponent("lib")
        for path in ["include/vsync/vsync-glib.h", "lib/pkgconfig/vsync-glib.pc"] {
            #expect(FileManager.default.fileExists(atPath: prefix.appendingPathComponent(path).path), "\(path) not installed")
        }
        let work = daemon.directory
        try FileManager.default.copyItem(at: LibvsyncTests.repository.appendingPathComponent("examples/vsync-glib.c"),
                                         to: work.appendingPathComponent("vsync-glib.c"))
        let build = try Command.run(["sh", "-c", "cd '\(work.path)' && cc vsync-glib.c $(pkg-config --cflags --libs vsync-glib) -o vsync-glib"],
                                    environment: ["PKG_CONFIG_PATH": lib.appendingPathComponent("pkgconfig").path])
        try #require(build.status == 0, "the README's cc line failed: \(build.output)")
        let fps = Self.hertz / 3
        let run = try Command.run([work.appendingPathComponent("vsync-glib").path, "--socket", daemon.socketPath, "--fps", "\(fps)",
                                   "--frames", "10"], environment: ["LD_LIBRARY_PATH": lib.path])
        #expect(run.status == 0, "\(run.output)")
        let ticks = run.output.split(separator: "\n").filter { $0.hasPrefix("seq ") }.map { $0.split(separator: " ") }
        #expect(ticks.count == 10 && run.output.contains("\n10 frames\n"), "\(run.output)")
        // "seq S  t T  interval I ms  skipped K": every third vblank, gaps counted.
        let sequences = ticks.compactMap { UInt64($0[1]) }, skipped = ticks.compactMap { UInt64($0[8]) }
        #expect(sequences.count == 10 && skipped.count == 10, "\(run.output)")
        for i in 1..<min(sequences.count, skipped.count) {
            #expect(sequences[i] - sequences[i - 1] == 3 * (1 + skipped[i]), "\(run.output)")
        }
        let interval = String(format: "%.3f", Double(3 * 1_000_000_000 / UInt64(Self.hertz)) / 1e6)
        #expect(ticks.allSatisfy { $0[5] == interval }, "interval \(interval) ms expected: \(run.output)")
    }
}
