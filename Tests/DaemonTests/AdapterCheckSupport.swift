import Foundation
import Synchronization
import Testing
import VsyncCore

/// What the main-loop adapters' tests share (LibvsyncGLibTests, LibvsyncQtTests): building a
/// check program from Tests/libvsync against the repository's headers, the built libvsync and a
/// library's pkg-config flags; running it while a raw subscriber records every tick vsyncd
/// sends; and reading its `key=value` lines.
enum AdapterCheck {
    /// `pkg-config --cflags --libs` of `modules`: GLib's and Qt's development packages, which
    /// Scripts/test.sh installs.
    static func pkgConfig(_ modules: [String]) throws -> [String] {
        let result = try Command.run(["pkg-config", "--cflags", "--libs"] + modules)
        try #require(result.status == 0, """
            pkg-config \(modules.joined(separator: " ")) failed: \(result.output)install libglib2.0-dev, \
            qt6-base-dev, qt6-declarative-dev and the QML modules qml6-module-qtquick, qml6-module-qtqml and \
            qml6-module-qtqml-workerscript (Scripts/test.sh does)
            """)
        return result.output.split(whereSeparator: \.isWhitespace).map(String.init)
    }

    /// Tests/libvsync/`name` built into `directory`, warnings as errors, linked to the built
    /// libvsync by its SONAME from a lib directory beside it (as LibvsyncTests.compile does).
    static func build(_ name: String, modules: [String], in directory: URL) throws -> String {
        let source = LibvsyncTests.repository.appendingPathComponent("Tests/libvsync/\(name)")
        let output = directory.appendingPathComponent(URL(fileURLWithPath: name).deletingPathExtension().lastPathComponent).path
        let lib = directory.appendingPathComponent("lib")
        try FileManager.default.createDirectory(at: lib, withIntermediateDirectories: true)
        let soname = lib.appendingPathComponent("libvsync.so.1").path
        if !FileManager.default.fileExists(atPath: soname) {
            try FileManager.default.createSymbolicLink(atPath: soname, withDestinationPath: try LibvsyncTests.library())
        }
        // Qt 6 is built with -reduce-relocations: code using it must be position independent
        // (a PIE executable crashes in its first signal).
        let compiler = name.hasSuffix(".cpp") ? ["c++", "-std=c++17", "-fPIC"] : ["cc", "-std=gnu11"]
        let result = try Command.run(compiler + ["-Wall", "-Wextra", "-Werror", "-pthread", "-I",
                                                 LibvsyncTests.repository.appendingPathComponent("include").path,
                                                 source.path, "-o", output] + (try pkgConfig(modules))
                                     + ["-L", lib.path, "-l:libvsync.so.1", "-Wl,-rpath," + lib.path])
        try #require(result.status == 0, "building \(name) failed: \(result.output)")
        return output
    }

    /// Scripts/install.sh with the prefix `directory`/usr (the units beside it): the headers
    /// and .pc files where pkg-config reads them as an installed libvsync's, so the examples build
    /// with the README's lines, GLib's and Qt's flags from the system's own .pc files.
    static func install(into directory: URL) throws -> URL {
        let prefix = directory.appendingPathComponent("usr")
        let binDir = URL(fileURLWithPath: DaemonProcess.binaryPath).deletingLastPathComponent().path
        let result = try Command.run([LibvsyncTests.repository.appendingPathComponent("Scripts/install.sh").path,
                                      "--bin-dir", binDir, "--destdir", "/", "--prefix", prefix.path,
                                      "--unit-dir", directory.appendingPathComponent("units").path, "--no-swift-library"])
        try #require(result.status == 0, "install.sh failed: \(result.output)")
        return prefix
    }

    /// A tick's place: vsyncd's display id and the vblank's sequence.
    struct Vblank: Hashable {
        let display: UInt32
        let sequence: UInt64
    }

    /// Runs `arguments` to completion on a thread of its own while this one records every tick
    /// `ticks` gets (the program's frames are checked against them), then reads what is left in
    /// the socket: ticks keep coming, so the tail is a bounded read.
    static func run(_ arguments: [String], environment: [String: String] = [:], recording ticks: RawClient,
                    timeout: Double = 60) throws -> (status: Int32, output: String, ticks: [Vblank: Tick]) {
        let run = Mutex<(status: Int32, output: String)?>(nil)
        Thread.detachNewThread {
            let result = (try? Command.run(arguments, environment: environment)) ?? (status: -1, output: "could not run \(arguments)")
            run.withLock { $0 = result }
        }
        var recorded: [Vblank: Tick] = [:]
        let deadline = Date().addingTimeInterval(timeout)
        while run.withLock({ $0 == nil }), Date() < deadline {
            if let t = ticks.nextTick(timeout: 0.1) { recorded[Vblank(display: t.displayID, sequence: t.sequence)] = t }
        }
        let tail = Date().addingTimeInterval(0.3)
        while Date() < tail, let t = ticks.nextTick(timeout: 0.1) {
            recorded[Vblank(display: t.displayID, sequence: t.sequence)] = t
        }
        let result = try #require(run.withLock { $0 }, "\(arguments[0]) did not finish in \(timeout) s")
        return (result.status, result.output, recorded)
    }

    /// The `key=value` words of each line starting with `prefix` (a value has no spaces).
    static func records(_ output: String, prefix: String) -> [[String: String]] {
        output.split(separator: "\n").filter { $0.hasPrefix(prefix) }.map { line in
            var fields: [String: String] = [:]
            for word in line.split(separator: " ") {
                guard let eq = word.firstIndex(of: "=") else { continue }
                fields[String(word[..<eq])] = String(word[word.index(after: eq)...])
            }
            return fields
        }
    }

    /// One frame line of a check program, as numbers.
    struct Frame {
        let sequence: UInt64
        let timestampNs: UInt64
        let durationNs: UInt64
        let skipped: UInt64
        let display: UInt32
        let fields: [String: String]

        init?(_ fields: [String: String]) {
            guard let s = fields["seq"].flatMap(UInt64.init), let t = fields["ts"].flatMap(UInt64.init),
                  let d = fields["duration"].flatMap(UInt64.init), let k = fields["skipped"].flatMap(UInt64.init),
                  let id = fields["display"].flatMap(UInt32.init) else { return nil }
            (sequence, timestampNs, durationNs, skipped, display, self.fields) = (s, t, d, k, id, fields)
        }

        func int(_ key: String) -> Int64? { fields[key].flatMap { Int64($0) ?? Double($0).map { Int64($0.rounded()) } } }
    }

    static func frames(_ output: String) -> [Frame] { records(output, prefix: "frame ").compactMap(Frame.init) }

    /// Each frame is vsyncd's: the timestamp and interval of the tick vsyncd sent for that
    /// display and vblank, with the flags of the timer or replay source (synthetic); and frames
    /// come one per vblank of a link, any gap counted in `skipped`.
    static func expectFramesAreVsyncdsTicks(_ frames: [Frame], _ ticks: [Vblank: Tick],
                                            sourceLocation: SourceLocation = #_sourceLocation) {
        for f in frames {
            guard let tick = ticks[Vblank(display: f.display, sequence: f.sequence)] else {
                Issue.record("vblank \(f.sequence) of display \(f.display) was never ticked to the raw subscriber", sourceLocation: sourceLocation)
                continue
            }
            #expect(f.timestampNs == tick.timestampNs, "vblank \(f.sequence): frame at \(f.timestampNs), vsyncd's tick at \(tick.timestampNs)",
                    sourceLocation: sourceLocation)
            #expect(f.durationNs == tick.displayIntervalNs, "vblank \(f.sequence): interval \(f.durationNs) vs \(tick.displayIntervalNs)",
                    sourceLocation: sourceLocation)
            #expect(f.int("flags").map { UInt32($0) & TickFlags.synthetic.rawValue != 0 } == true, "\(f.fields)", sourceLocation: sourceLocation)
        }
        // Within one link: a new link's first frame counts no gap (the Qt driver relinks when its
        // window changes screens, even to the display it had).
        for (a, b) in zip(frames, frames.dropFirst()) where a.display == b.display && a.fields["selector"] == b.fields["selector"] {
            #expect(b.sequence == a.sequence + 1 + b.skipped, "vblank \(a.sequence) → \(b.sequence) with skipped \(b.skipped)",
                    sourceLocation: sourceLocation)
        }
    }

    /// The wake-up line of a check program: a window of at least `vblanks` vblanks of a running
    /// link in which the loop thread was asleep throughout: it never returned from poll and made
    /// no voluntary context switch.
    static func expectIdle(_ output: String, vblanks: Int, sourceLocation: SourceLocation = #_sourceLocation) {
        let idle = records(output, prefix: "idle ")
        #expect(idle.count == 1, "\(output)", sourceLocation: sourceLocation)
        guard let line = idle.first else { return }
        #expect((line["window"].flatMap(Int.init) ?? 0) >= vblanks, "\(line)", sourceLocation: sourceLocation)
        if let wakeups = line["wakeups"] { #expect(wakeups == "0", "the loop woke: \(line)", sourceLocation: sourceLocation) }
        #expect(line["switches"] == "0", "the loop thread woke: \(line)", sourceLocation: sourceLocation)
        #expect(line["state"] == "S", "the loop thread is not asleep: \(line)", sourceLocation: sourceLocation)
    }
}
