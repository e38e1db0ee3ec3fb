import Foundation
import Glibc
import Testing
import VsyncClientCore
import VsyncCore

/// libvsync, the C library: its header, its ABI and exports, and C and Python programs built the
/// way users build them, run against the REAL vsyncd with the Swift toolchain hidden.
@Suite("libvsync", .serialized)
struct LibvsyncTests {
    static let repository = SystemdUnitTests.repository
    static let header = repository.appendingPathComponent("include/vsync/vsync.h")

    /// The built library, next to the other products.
    static func library() throws -> String { try DaemonProcess.binary("libvsync.so") }

    static func run(_ arguments: [String], environment: [String: String] = [:]) throws -> (status: Int32, output: String) {
        try Command.run(arguments, environment: environment)
    }

    /// The Swift toolchain's root (the real path of `swift`, up from usr/bin), which programs
    /// linking libvsync must not need.
    static func toolchainRoot() throws -> String {
        // `swift` may be a link to swift-driver: the root is three levels up either way.
        let which = try run(["sh", "-c", "readlink -f \"$(command -v swift)\""])
        let bin = URL(fileURLWithPath: which.output.trimmingCharacters(in: .whitespacesAndNewlines)).deletingLastPathComponent()
        try #require(which.status == 0 && bin.path.hasSuffix("/usr/bin"), "cannot find the toolchain: \(which.output)")
        return bin.deletingLastPathComponent().deletingLastPathComponent().path
    }

    /// `command` in a mount namespace where an empty tmpfs covers the toolchain (we are root in CI).
    static func withoutToolchain(_ command: String, environment: [String: String] = [:]) throws -> (status: Int32, output: String) {
        let root = try toolchainRoot()
        return try run(["unshare", "-m", "sh", "-c",
                        "mount -t tmpfs none '\(root)' && ! test -e '\(root)/usr/bin' && \(command)"],
                       environment: environment)
    }

    /// A C file compiled against the repository's header and the built library, which it
    /// finds by its SONAME (libvsync.so.1) in a lib directory beside the output.
    static func compile(_ source: URL, to output: String, extra: [String] = []) throws {
        let lib = URL(fileURLWithPath: output).deletingLastPathComponent().appendingPathComponent("lib")
        try FileManager.default.createDirectory(at: lib, withIntermediateDirectories: true)
        for name in ["libvsync.so", "libvsync.so.1"] where !FileManager.default.fileExists(atPath: lib.appendingPathComponent(name).path) {
            try FileManager.default.createSymbolicLink(atPath: lib.appendingPathComponent(name).path, withDestinationPath: try library())
        }
        let result = try run(["cc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-I",
                              repository.appendingPathComponent("include").path, source.path,
                              "-L", lib.path, "-lvsync", "-Wl,-rpath," + lib.path, "-o", output] + extra)
        try #require(result.status == 0, "cc \(source.lastPathComponent) failed: \(result.output)")
    }

    static func temporaryDirectory() throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("libvsync-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir
    }

    // MARK: The header and the library

    @Test func headerCompilesCleanlyAsC99AndCxx() throws {
        let dir = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let source = dir.appendingPathComponent("h.c")
        try "#include <vsync/vsync.h>\nint main(void) { return vsync_now_ns() == 0; }\n".write(to: source, atomically: true, encoding: .utf8)
        let include = Self.repository.appendingPathComponent("include").path
        for (compiler, standard) in [("cc", "-std=c99"), ("c++", "-std=c++11")] {
            var arguments = [compiler, standard, "-Wall", "-Wextra", "-Werror", "-pedantic", "-I", include, "-c", source.path,
                             "-o", dir.appendingPathComponent("h.o").path]
            if compiler == "c++" { arguments.insert(contentsOf: ["-x", "c++"], at: 2) }
            let result = try Self.run(arguments)
            #expect(result.status == 0, "\(compiler) \(standard): \(result.output)")
        }
    }

    /// The header repeats the core's error codes, tick flags and display-event kinds: they must
    /// agree. Its error codes are errno values (checked against <errno.h> here and by traps.c),
    /// and the library's own display kind, WAITING, is no wire kind.
    @Test func headerConstantsMatchTheSwiftDefinitions() throws {
        let text = try String(contentsOf: Self.header, encoding: .utf8)
        var defines: [String: Int32] = [:]
        for line in text.split(separator: "\n") where line.hasPrefix("#define VSYNC_") {
            let parts = line.split(separator: " ", omittingEmptySubsequences: true)
            guard parts.count >= 3, let value = Int32(parts[2].trimmingCharacters(in: CharacterSet(charactersIn: "u"))) else { continue }
            defines[String(parts[1])] = value
        }
        let names: [ClientErrorCode: String] = [
            .noDaemon: "VSYNC_ENODAEMON", .permissionDenied: "VSYNC_EACCES", .connectionFailed: "VSYNC_ECONNECT",
            .connectionLost: "VSYNC_ECONNLOST", .refused: "VSYNC_EREFUSED", .displayNotFound: "VSYNC_ENODISPLAY",
            .displayGone: "VSYNC_EDISPLAYGONE", .requestFailed: "VSYNC_EREQUEST", .protocolViolation: "VSYNC_EPROTO",
            .invalidArgument: "VSYNC_EINVAL", .outOfMemory: "VSYNC_ENOMEM", .timedOut: "VSYNC_ETIMEDOUT",
            .notConnected: "VSYNC_ENOTCONN", .busy: "VSYNC_EBUSY", .noTimingPage: "VSYNC_ENOPAGE",
            .notOnTimingPage: "VSYNC_ENOTONPAGE", .timingBusy: "VSYNC_EAGAIN",
        ]
        let errnos: [ClientErrorCode: Int32] = [
            .noDaemon: ECONNREFUSED, .permissionDenied: EACCES, .connectionFailed: EIO, .connectionLost: ECONNRESET,
            .refused: ECONNABORTED, .displayNotFound: ENODEV, .displayGone: ENXIO, .requestFailed: EREMOTEIO,
            .protocolViolation: EPROTO, .invalidArgument: EINVAL, .outOfMemory: ENOMEM, .timedOut: ETIMEDOUT,
            .notConnected: ENOTCONN, .busy: EBUSY, .noTimingPage: ENODATA, .notOnTimingPage: ENOENT, .timingBusy: EAGAIN,
        ]
        for code in ClientErrorCode.allCases {
            let name = try #require(names[code], "no header name for \(code)")
            #expect(defines[name] == code.rawValue, "\(name)")
            #expect(code.rawValue == errnos[code], "\(name) is not its errno")
        }
        #expect(defines.keys.filter { $0.hasPrefix("VSYNC_E") }.count == ClientErrorCode.allCases.count)
        #expect(defines["VSYNC_FRAME_HARDWARE"] == Int32(TickFlags.hardwareTimestamp.rawValue))
        #expect(defines["VSYNC_FRAME_PREDICTED"] == Int32(TickFlags.predicted.rawValue))
        #expect(defines["VSYNC_FRAME_SYNTHETIC"] == Int32(TickFlags.synthetic.rawValue))
        #expect(defines["VSYNC_DISPLAY_MODE_CHANGED"] == Int32(DisplayEventKind.modeChanged.rawValue))
        #expect(defines["VSYNC_DISPLAY_OFF"] == Int32(DisplayEventKind.off.rawValue))
        #expect(defines["VSYNC_DISPLAY_ON"] == Int32(DisplayEventKind.on.rawValue))
        let waiting = try #require(defines["VSYNC_DISPLAY_WAITING"])
        #expect(!DisplayEventKind.allCases.contains { Int32($0.rawValue) == waiting }, "WAITING \(waiting) is a wire kind")
        #expect(defines["VSYNC_DISPLAY_FLAG_HARDWARE_CLOCK"] == Int32(DisplayFlags.hardwareClock.rawValue))
        #expect(defines["VSYNC_DISPLAY_FLAG_SYNTHETIC"] == Int32(DisplayFlags.synthetic.rawValue))
        #expect(defines["VSYNC_DISPLAY_FLAG_PRIMARY"] == Int32(DisplayFlags.primary.rawValue))
        #expect(defines["VSYNC_DISPLAY_STATE_ON"] == Int32(DisplayState.on.rawValue))
        #expect(defines["VSYNC_DISPLAY_STATE_OFF"] == Int32(DisplayState.off.rawValue))
        #expect(defines["VSYNC_MAX_DISPLAYS"] == Int32(ServerMessage.maxDisplaysPerList))
        // enum vsync_frame_reason's "    VSYNC_REASON_X = N," lines are FrameJankReason's raw values.
        let reasons = text.split(separator: "\n").filter { $0.hasPrefix("    VSYNC_REASON_") }.map { $0.split(separator: " ") }
        #expect(reasons.map { UInt32($0[2].trimmingCharacters(in: .punctuationCharacters)) } == FrameJankReason.allCases.map(\.rawValue))
        let snake = { (name: String) in name.map { $0.isUppercase ? "_\($0)" : $0.uppercased() }.joined() }
        #expect(reasons.map { String($0[0]) } == FrameJankReason.allCases.map { "VSYNC_REASON_" + snake($0.name) })
        #expect(defines["VSYNC_REASON_COUNT"] == Int32(FrameJankReason.allCases.count))
        #expect(defines["VSYNC_JANK_PRESENT_THRESHOLD_NS"] == Int32(FrameJankThresholds.frameTimeline.presentNs))
        #expect(defines["VSYNC_JANK_DEADLINE_THRESHOLD_NS"] == Int32(FrameJankThresholds.frameTimeline.deadlineNs))
        #expect(defines["VSYNC_JANK_START_THRESHOLD_NS"] == Int32(FrameJankThresholds.frameTimeline.startNs))
    }

    /// libvsync compiles the protocol's and the core's own files (symlinks), so there is one
    /// definition: a new file there must be linked in too.
    @Test func theLibraryCompilesEveryProtocolAndCoreSource() throws {
        let sources = Self.repository.appendingPathComponent("Sources")
        let library = sources.appendingPathComponent("libvsync")
        let linked = try FileManager.default.contentsOfDirectory(atPath: library.path).compactMap { name -> String? in
            let target = library.appendingPathComponent(name).resolvingSymlinksInPath()
            return target.path == library.appendingPathComponent(name).path ? nil : target.path
        }
        var shared = ["VsyncCore/Timing/FrameRateRange.swift"]
        for dir in ["VsyncCore/Protocol", "VsyncClientCore"] {
            shared += try FileManager.default.contentsOfDirectory(atPath: sources.appendingPathComponent(dir).path)
                .filter { $0.hasSuffix(".swift") }.map { "\(dir)/\($0)" }
        }
        for file in shared {
            #expect(linked.contains(sources.appendingPathComponent(file).resolvingSymlinksInPath().path),
                    "Sources/libvsync has no symlink to \(file)")
        }
    }

    @Test func theLibraryNeedsOnlyLibcAndExportsOnlyTheAPI() throws {
        let lib = try Self.library()
        let soname = try Self.run(["readelf", "-d", lib])
        #expect(soname.output.contains("Library soname: [libvsync.so.1]"), "\(soname.output)")
        let ldd = try Self.run(["ldd", lib])
        try #require(ldd.status == 0, "\(ldd.output)")
        let needed = ldd.output.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.hasPrefix("linux-vdso") && !$0.hasPrefix("/lib64/ld-linux") }
        // libc, and the dynamic loader of every program (for the per-thread error's TLS).
        #expect(needed.count == 1 && needed.first?.hasPrefix("libc.so.6") == true, "ldd: \(ldd.output)")
        // Exactly the header's functions (and the version node), nothing of Swift's.
        let nm = try Self.run(["nm", "-D", "--defined-only", "-g", lib])
        let exported = Set(nm.output.split(separator: "\n").compactMap { line -> String? in
            line.split(separator: " ").last.map { String($0.split(separator: "@").first ?? $0) }
        })
        let header = try String(contentsOf: Self.header, encoding: .utf8)
        let declared = Set(header.split(separator: "\n").compactMap { line -> String? in
            guard !line.hasPrefix("typedef"), !line.hasPrefix(" "), let open = line.firstIndex(of: "(") else { return nil }
            let name = line[..<open].split(separator: " ").last.map { String($0.drop { $0 == "*" }) }
            return name?.hasPrefix("vsync_") == true ? name : nil
        })
        #expect(declared.count >= 15, "header parse: \(declared)")
        #expect(exported == declared.union(["VSYNC_1", "VSYNC_1.1", "VSYNC_1.2"]), "exported \(exported.sorted()) vs declared \(declared.sorted())")
    }

    /// The version script lists every export by name (no wildcard), and it lists exactly the
    /// header's functions and the library's `@_cdecl` exports: an export someone forgot to list
    /// (or to version) fails here.
    @Test func theVersionScriptListsEveryExportByName() throws {
        let map = try String(contentsOf: Self.repository.appendingPathComponent("Sources/libvsync/vsync.map"), encoding: .utf8)
        let entries = map.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { $0.hasSuffix(";") && !$0.hasPrefix("}") && !$0.hasPrefix("/*") && !$0.hasPrefix("*") }
            .map { String($0.dropLast()) }
        let listed = Set(entries.filter { $0.hasPrefix("vsync_") })
        #expect(!entries.contains { $0.hasPrefix("vsync") && $0.contains("*") }, "a wildcard in vsync.map: \(entries)")
        let header = try String(contentsOf: Self.header, encoding: .utf8)
        let declared = Set(header.split(separator: "\n").compactMap { line -> String? in
            guard !line.hasPrefix("typedef"), !line.hasPrefix(" "), let open = line.firstIndex(of: "(") else { return nil }
            let name = line[..<open].split(separator: " ").last.map { String($0.drop { $0 == "*" }) }
            return name?.hasPrefix("vsync_") == true ? name : nil
        })
        let library = Self.repository.appendingPathComponent("Sources/libvsync")
        var exported = Set<String>()
        for file in try FileManager.default.contentsOfDirectory(atPath: library.path) where file.hasPrefix("CABI") {
            let text = try String(contentsOf: library.appendingPathComponent(file), encoding: .utf8)
            for line in text.split(separator: "\n") where line.hasPrefix("@_cdecl(\"") {
                exported.insert(String(line.dropFirst(9).prefix { $0 != "\"" }))
            }
        }
        #expect(exported.count >= 21, "\(exported)")
        #expect(listed == declared, "vsync.map \(listed.sorted()) vs header \(declared.sorted())")
        #expect(exported.subtracting(listed).isEmpty, "@_cdecl exports missing from vsync.map: \(exported.subtracting(listed).sorted())")
        #expect(listed.subtracting(exported).isEmpty, "vsync.map names no export: \(listed.subtracting(exported).sorted())")
    }

    /// The C ABI: strerror's lines are the core's, the struct layout is what ctypes users copy.
    @Test func strerrorAndLayoutThroughTheCABI() throws {
        let dir = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let check = dir.appendingPathComponent("abi-check").path
        try Self.compile(Self.repository.appendingPathComponent("Tests/libvsync/abi-check.c"), to: check)
        let strerror = try Self.run([check, "strerror"])
        let lines = strerror.output.split(separator: "\n").map(String.init)
        for code in ClientErrorCode.allCases {
            #expect(lines.contains("\(code.rawValue) \(code.message)"), "code \(code.rawValue): \(strerror.output)")
        }
        #expect(lines.contains("positive \(ClientErrorCode.noDaemon.message)"))
        // Another errno: the C library's text.
        #expect(lines.contains("\(EPIPE) \(String(cString: Glibc.strerror(EPIPE)))"), "\(strerror.output)")

        // The Python example's ctypes mirror must have the C layout.
        let layout = try Self.run([check, "layout"]).output.split(separator: "\n").first.map(String.init) ?? ""
        let python = try Self.run(["python3", "-c", """
            import sys; sys.path.insert(0, sys.argv[1]); import vsync_ticks as v
            F = v.Frame
            print("vsync_frame %d " % __import__("ctypes").sizeof(F) + " ".join("%s=%d" % (n, getattr(F, n).offset) for n, _ in F._fields_))
            """, Self.repository.appendingPathComponent("examples").path])
        #expect(python.output.trimmingCharacters(in: .whitespacesAndNewlines) == layout, "C: \(layout)\nPython: \(python.output)")
    }

    @Test func connectWithoutADaemonFailsWithTheLineThatSaysWhatToDo() throws {
        let dir = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let check = dir.appendingPathComponent("abi-check").path
        try Self.compile(Self.repository.appendingPathComponent("Tests/libvsync/abi-check.c"), to: check)
        let missing = dir.appendingPathComponent("none.sock").path
        let result = try Self.run([check, "connect", missing])
        #expect(result.output.contains("rc=-\(ECONNREFUSED) client=null"), "\(result.output)")
        #expect(result.output.contains("last=\(ClientError.noDaemon(socketPath: missing).description)"), "\(result.output)")
    }

    // MARK: Against vsyncd

    /// A link destroys itself from its own callback and makes another at 30 fps; vsyncd is then
    /// killed and restarted: the same fd reports the loss once and ticks resume at 30 fps.
    @Test(.timeLimit(.minutes(1)))
    func callbacksMayDestroyLinksAndTheClientSurvivesADaemonRestart() throws {
        let daemon = try DaemonProcess(hertz: 60, logLevel: "warning")
        defer { daemon.stop() }
        let check = daemon.directory.appendingPathComponent("abi-check").path
        try Self.compile(Self.repository.appendingPathComponent("Tests/libvsync/abi-check.c"), to: check)
        let outputURL = daemon.directory.appendingPathComponent("abi-check.out")
        _ = FileManager.default.createFile(atPath: outputURL.path, contents: nil)
        let program = Process()
        program.executableURL = URL(fileURLWithPath: check)
        program.arguments = ["run", daemon.socketPath, "5"]
        program.standardOutput = try FileHandle(forWritingTo: outputURL)
        try program.run()
        defer { if program.isRunning { kill(program.processIdentifier, SIGKILL) } }
        func output() -> String { (try? String(contentsOf: outputURL, encoding: .utf8)) ?? "" }
        func waitFor(_ what: String, timeout: Double = 10, _ done: (String) -> Bool) throws {
            let deadline = Date().addingTimeInterval(timeout)
            while !done(output()) {
                try #require(Date() < deadline, "no \(what) within \(timeout) s; output:\n\(output())")
                usleep(20_000)
            }
        }
        try waitFor("frames of the second link") { $0.components(separatedBy: "link=second").count > 4 }
        daemon.kill()
        try daemon.start()
        program.waitUntilExit()
        let lines = output().split(separator: "\n").map(String.init)
        #expect(program.terminationStatus == 0, "\(output())")
        // Three frames of the first link at full rate, then it is gone.
        let first = lines.filter { $0.hasPrefix("frame link=first") }
        #expect(first.count == 3 && first.allSatisfy { $0.contains("divisor=1") }, "\(first)")
        #expect(lines.contains("destroyed first"))
        #expect(!lines.contains { $0.contains("accepted") || $0.contains("failed") || $0.contains("fd changed") }, "\(lines)")
        // The second at 30 of 60 Hz: every other vblank, each step 2 × (1 + skipped).
        let second = lines.filter { $0.hasPrefix("frame link=second") }
        let sequences = second.compactMap { line in line.split(separator: " ").first { $0.hasPrefix("seq=") }.flatMap { UInt64($0.dropFirst(4)) } }
        #expect(second.allSatisfy { $0.contains("divisor=2") && $0.contains("size=\(160)") }, "\(second)")
        #expect(sequences.allSatisfy { $0 % 2 == 0 })
        // The restart: reported once on the live link, with the core's line.
        let errors = lines.filter { $0.hasPrefix("error ") }
        #expect(errors.first == "error link=second code=-\(ClientErrorCode.connectionLost.rawValue) message=\(ClientError.connectionLost(socketPath: daemon.socketPath).description)", "\(errors)")
        #expect(lines.last?.hasPrefix("done refresh_mhz=60000 period_ns=16666667 max_fps=60") == true, "\(lines.last ?? "")")
    }

    /// The README's way: install.sh stages the library, the header and vsync.pc; the C example
    /// builds with exactly `cc example.c $(pkg-config --cflags --libs vsync)`, and it and the
    /// Python example get ticks at their rates from vsyncd with the Swift toolchain hidden.
    @Test(.timeLimit(.minutes(2)))
    func installedExamplesGetTicksWithoutTheSwiftToolchain() throws {
        let daemon = try DaemonProcess(hertz: 60, logLevel: "warning")
        defer { daemon.stop() }
        let destdir = try SystemdUnitTests.stage()
        defer { try? FileManager.default.removeItem(at: destdir) }
        let prefix = destdir.appendingPathComponent("usr/local")
        let lib = prefix.appendingPathComponent("lib")
        for path in ["lib/libvsync.so.1", "lib/libvsync.so", "include/vsync/vsync.h", "lib/pkgconfig/vsync.pc"] {
            #expect(FileManager.default.fileExists(atPath: prefix.appendingPathComponent(path).path), "\(path) not installed")
        }
        let pc = try String(contentsOf: lib.appendingPathComponent("pkgconfig/vsync.pc"), encoding: .utf8)
        #expect(pc.contains("prefix=/usr/local\n") && pc.contains("Libs: -L${libdir} -lvsync"), "\(pc)")

        let work = daemon.directory
        try FileManager.default.copyItem(at: Self.repository.appendingPathComponent("examples/vsync-ticks.c"),
                                         to: work.appendingPathComponent("example.c"))
        let pkgEnvironment = ["PKG_CONFIG_PATH": lib.appendingPathComponent("pkgconfig").path,
                              "PKG_CONFIG_SYSROOT_DIR": destdir.path]
        let build = try Self.run(["sh", "-c", "cd '\(work.path)' && cc example.c $(pkg-config --cflags --libs vsync) -o example"],
                                 environment: pkgEnvironment)
        try #require(build.status == 0, "the README's cc line failed: \(build.output)")

        let environment = ["LD_LIBRARY_PATH": lib.path, "VSYNC_LIB": lib.appendingPathComponent("libvsync.so.1").path]
        let c = try Self.withoutToolchain("'\(work.path)/example' --socket '\(daemon.socketPath)' --fps 30 --frames 12",
                                          environment: environment)
        #expect(c.status == 0, "\(c.output)")
        Self.expectTicks(c.output, count: 12, divisor: 2)
        #expect(c.output.contains("12 frames; display 60.000 Hz (max 60 fps)"), "\(c.output)")

        // Frame pacing: woken 4 ms before each target, a multiple of the divisor ahead of the vblank.
        let paced = try Self.withoutToolchain("'\(work.path)/example' --socket '\(daemon.socketPath)' --fps 30 --frames 12 --work-ms 4",
                                              environment: environment)
        #expect(paced.status == 0, "\(paced.output)")
        let targets = paced.output.split(separator: "\n").filter { $0.hasPrefix("seq ") }.compactMap { line -> (UInt64, UInt64, UInt64)? in
            let w = line.split(separator: " ")
            guard let t = w.firstIndex(of: "target_seq"), let n = w.firstIndex(of: "next"), let seq = UInt64(w[1]),
                  let target = UInt64(w[t + 1]), let next = UInt64(w[n + 1]) else { return nil }
            return (seq, target, next)
        }
        #expect(targets.count == 12, "\(paced.output)")
        #expect(targets.allSatisfy { $0.1 % 2 == 0 && $0.1 > $0.0 && $0.2 == $0.1 + 2 }, "\(paced.output)")

        let python = try Self.withoutToolchain(
            "python3 '\(Self.repository.path)/examples/vsync_ticks.py' --socket '\(daemon.socketPath)' --fps 20 --frames 8",
            environment: environment)
        #expect(python.status == 0, "\(python.output)")
        Self.expectTicks(python.output, count: 8, divisor: 3)

        let noDaemon = try Self.withoutToolchain("'\(work.path)/example' --socket '\(work.path)/none.sock'", environment: environment)
        #expect(noDaemon.status == 1 && noDaemon.output.contains("no vsyncd at \(work.path)/none.sock"), "\(noDaemon.output)")
    }

    /// `count` tick lines at `divisor`, each step a whole number of frames at that rate.
    static func expectTicks(_ output: String, count: Int, divisor: UInt64, sourceLocation: SourceLocation = #_sourceLocation) {
        let ticks = output.split(separator: "\n").filter { $0.hasPrefix("seq ") }
        #expect(ticks.count == count, "\(output)", sourceLocation: sourceLocation)
        let sequences = ticks.compactMap { UInt64($0.split(separator: " ")[1]) }
        let skipped = ticks.compactMap { line -> UInt64? in
            let words = line.split(separator: " ")
            return words.firstIndex(of: "skipped").flatMap { UInt64(words[$0 + 1]) }
        }
        #expect(sequences.count == count && skipped.count == count, "\(output)", sourceLocation: sourceLocation)
        #expect(ticks.allSatisfy { $0.contains("divisor \(divisor) ") }, "\(output)", sourceLocation: sourceLocation)
        for i in 1..<min(sequences.count, skipped.count) {
            #expect(sequences[i] - sequences[i - 1] == divisor * (1 + skipped[i]),
                    "\(sequences[i - 1]) → \(sequences[i]) with skipped \(skipped[i])", sourceLocation: sourceLocation)
        }
    }
}
