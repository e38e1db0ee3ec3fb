import Foundation
import Testing
import VsyncCore

/// The Qt adapter (include/vsync/vsync-qt.h) with Debian's Qt 6, headless on the offscreen
/// platform, against the real vsyncd: Tests/libvsync/qt-check.cpp animates a Qt Quick scene with
/// the driver installed, and its frames and animation times are compared with the ticks a raw
/// subscriber got.
@Suite("libvsync Qt animation driver", .serialized)
struct LibvsyncQtTests {
    /// Not 60 Hz: Qt's own fallback steps animations as if every frame were 1/60 s.
    static let hertz = 75

    static func environment(_ directory: URL, _ extra: [String: String] = [:]) throws -> [String: String] {
        let runtime = directory.appendingPathComponent("xdg-runtime")
        try FileManager.default.createDirectory(at: runtime, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        return ["QT_QPA_PLATFORM": "offscreen", "XDG_RUNTIME_DIR": runtime.path, "QSG_INFO": "1"].merging(extra) { $1 }
    }

    /// Every frame, each animation (a QVariantAnimation and a QML NumberAnimation) moved by the
    /// time between the frames' vblanks. Qt counts animation time in whole milliseconds and the
    /// driver truncates the time since its start, so from the first frame on the animation's
    /// time and the vblanks' differ by less than 1 ms, however many frames pass: a driver
    /// stepping 1/60 s, or reading the wall clock at dispatch, misses by far more.
    static func expectAnimationsFollowTheVblanks(_ frames: [AdapterCheck.Frame], sourceLocation: SourceLocation = #_sourceLocation) {
        guard let first = frames.first, let anim0 = first.int("anim") else {
            Issue.record("no frames with animation times", sourceLocation: sourceLocation)
            return
        }
        for f in frames {
            guard let anim = f.int("anim") else {
                Issue.record("no animation time: \(f.fields)", sourceLocation: sourceLocation)
                continue
            }
            let animated = (anim - anim0) * 1_000_000
            let vblanks = Int64(f.timestampNs) - Int64(first.timestampNs)
            #expect(abs(animated - vblanks) < 1_000_000,
                    "vblank \(f.sequence): animated \(anim - anim0) ms in \(Double(vblanks) / 1e6) ms of vblanks", sourceLocation: sourceLocation)
            if let qml = f.int("qml"), let qml0 = first.int("qml") {
                #expect(qml - qml0 == anim - anim0, "QML's animation moved \(qml - qml0) ms, the C++ one \(anim - anim0) ms",
                        sourceLocation: sourceLocation)
            }
        }
    }

    /// With Qt Quick's basic render loop and its threaded one (which installs a driver of its own,
    /// stepping 1/60 s on this platform: the one installed first wins).
    @Test(.timeLimit(.minutes(3)), arguments: ["basic", "threaded"])
    func animationsAdvanceByTheRealFrameIntervalAndTheLoopSleepsWhenNoneRuns(renderLoop: String) throws {
        let daemon = try DaemonProcess(hertz: Double(Self.hertz), logLevel: "warning")
        defer { daemon.stop() }
        let check = try AdapterCheck.build("qt-check.cpp", modules: ["Qt6Quick"], in: daemon.directory)
        let ticks = try RawClient(path: daemon.socketPath)
        try ticks.handshake(version: 4)
        let display = try ticks.subscribe(1, fps: Self.hertz, selector: .primary)
        let frameCount = 40, window = 40
        let run = try AdapterCheck.run([check, "animate", daemon.socketPath, "\(frameCount)", "\(window)"],
                                       environment: try Self.environment(daemon.directory, ["QSG_RENDER_LOOP": renderLoop]),
                                       recording: ticks)
        let output = run.output
        #expect(run.status == 0, "\(output)")
        // Qt assumes a refresh of its own for the screen; the test means something only if it is
        // not the display's.
        let screen = try #require(AdapterCheck.records(output, prefix: "screen=").first, "\(output)")
        #expect(screen["refresh"].flatMap(Double.init).map { abs($0 - Double(Self.hertz)) > 1 } == true, "\(screen)")
        if renderLoop == "threaded" {
            #expect(output.contains("QUnifiedTimer: animation driver already installed"),
                    "Qt Quick's threaded render loop did not try to install its driver: \(output)")
        }

        let frames = AdapterCheck.frames(output)
        #expect(frames.count == frameCount, "\(output)")
        AdapterCheck.expectFramesAreVsyncdsTicks(frames, run.ticks)
        #expect(frames.allSatisfy { $0.display == display.displayID && $0.durationNs == display.displayIntervalNs }, "\(output)")
        Self.expectAnimationsFollowTheVblanks(frames)
        // Frame to frame too: each step is the vblanks' step, truncated to the millisecond.
        for (a, b) in zip(frames, frames.dropFirst()) {
            let step = (b.int("anim") ?? 0) - (a.int("anim") ?? 0)
            let vblanks = Int64(b.timestampNs - a.timestampNs)
            #expect(step == vblanks / 1_000_000 || step == vblanks / 1_000_000 + 1, "vblank \(b.sequence): stepped \(step) ms in \(vblanks) ns")
            #expect(b.int("elapsed").map { $0 - (a.int("elapsed") ?? 0) } == step, "\(a.fields) → \(b.fields)")
        }

        // No animation left: Qt stopped the driver, its link is paused and the GUI thread sleeps.
        #expect(output.contains("stopped; settled displays=1 "), "\(output)")
        AdapterCheck.expectIdle(output, vblanks: window)
        #expect(output.contains("frames=\(frameCount) running=0"), "\(output)")
    }

    /// install() after a QQuickWindow exists: Qt Quick's threaded render loop has installed its
    /// own driver, Qt keeps it, and install() says so; the basic loop installs none, so there it
    /// succeeds.
    @Test(.timeLimit(.minutes(2)))
    func installSaysWhenQtKeptAnotherDriver() throws {
        let daemon = try DaemonProcess(hertz: Double(Self.hertz), logLevel: "warning")
        defer { daemon.stop() }
        let check = try AdapterCheck.build("qt-check.cpp", modules: ["Qt6Quick"], in: daemon.directory)
        for (renderLoop, installed) in [("threaded", false), ("basic", true)] {
            let run = try Command.run([check, "late", daemon.socketPath],
                                      environment: try Self.environment(daemon.directory, ["QSG_RENDER_LOOP": renderLoop]))
            #expect(run.status == 0, "\(run.output)")
            #expect(run.output.contains("install after a QQuickWindow: \(installed) ("), "\(renderLoop): \(run.output)")
            if !installed {
                #expect(run.output.contains("install the vsync driver first"), "\(run.output)")
                #expect(!run.output.contains("QUnifiedTimer: animation driver already installed"), "Qt's warning reached the log: \(run.output)")
            }
        }
    }

    /// Screen names for vsyncd's HDMI-A-1 and DP-1: as Wayland compositors and eglfs give them
    /// (the kernel's), as X servers' RandR does with the modesetting driver and Intel's older one,
    /// and as with amdgpu's (counting from 0).
    static let screenNames: [(hdmi: String, dp: String)] = [("HDMI-A-1", "DP-1"), ("HDMI-1", "DP1"), ("HDMI-A-0", "DisplayPort-0")]

    /// Two displays (a replayed trace, flagged synthetic like the timer source) at 144 and
    /// 75 Hz; the offscreen platform gets screens named as each windowing system names them, and
    /// one vsyncd does not know. The window moves between them: the driver follows, to the
    /// screen's own display, or to vsyncd's primary for the unknown one.
    @Test(.timeLimit(.minutes(3)), arguments: 0..<screenNames.count)
    func theDriverFollowsTheWindowToTheDisplayItIsOn(names: Int) throws {
        let (hdmiName, dpName) = Self.screenNames[names]
        let dir = try LibvsyncTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let check = try AdapterCheck.build("qt-check.cpp", modules: ["Qt6Quick"], in: dir)
        let rates = [("DP-1", 144), ("HDMI-A-1", 75)]
        let trace = dir.appendingPathComponent("two-displays.trace")
        try Self.trace(rates, seconds: 60).write(to: trace, atomically: true, encoding: .utf8)
        let config = dir.appendingPathComponent("screens.json")
        try """
            {"screens": [
              {"name": "\(hdmiName)", "x": 0, "y": 0, "width": 1920, "height": 1080, "logicalDpi": 96},
              {"name": "\(dpName)", "x": 1920, "y": 0, "width": 2560, "height": 1440, "logicalDpi": 96},
              {"name": "Elsewhere-1", "x": 4480, "y": 0, "width": 1024, "height": 768, "logicalDpi": 96}
            ]}
            """.write(to: config, atomically: true, encoding: .utf8)

        let daemon = try DaemonProcess(extra: ["--source", "replay:\(trace.path)"], logLevel: "warning")
        defer { daemon.stop() }
        let ticks = try RawClient(path: daemon.socketPath)
        try ticks.handshake(version: 4)
        let dp = try ticks.subscribe(1, fps: 144, selector: .connector("DP-1"))
        let hdmi = try ticks.subscribe(2, fps: 75, selector: .connector("HDMI-A-1"))
        let primary = try ticks.subscribe(3, fps: 144, selector: .primary)
        try #require(primary.displayID != hdmi.displayID, "the fallback must be told apart from HDMI-A-1")
        let path = [hdmiName, dpName, "Elsewhere-1", hdmiName]
        let expected: [(selector: String, display: Subscribed)] = [("HDMI-A-1", hdmi), ("DP-1", dp), ("primary", primary), ("HDMI-A-1", hdmi)]
        let perLeg = 12
        let run = try AdapterCheck.run([check, "follow", daemon.socketPath, "\(perLeg)"] + path,
                                       environment: try Self.environment(dir, ["QT_QPA_PLATFORM": "offscreen:configfile=\(config.path)"]),
                                       recording: ticks)
        let output = run.output
        #expect(run.status == 0, "\(output)")
        let frames = AdapterCheck.frames(output)
        #expect(frames.count == perLeg * path.count, "\(output)")
        for (leg, want) in expected.enumerated() {
            let legFrames = frames.dropFirst(leg * perLeg).prefix(perLeg)
            for f in legFrames {
                #expect(f.fields["screen"] == path[leg] && f.fields["selector"] == want.selector && f.display == want.display.displayID,
                        "leg \(leg) on \(path[leg]): \(f.fields)")
            }
            if leg > 0 {
                #expect(output.contains("moved to \(path[leg]): window on \(path[leg]), selector \(want.selector)\n"), "\(output)")
            }
        }
        AdapterCheck.expectFramesAreVsyncdsTicks(frames, run.ticks)
        Self.expectAnimationsFollowTheVblanks(frames)
    }

    /// examples/vsync-qt.cpp built the README's way against an install (vsync-qt.pc brings Qt's
    /// flags): its QML RotationAnimation (360° in 2 s) turns by the time between the vblanks.
    @Test(.timeLimit(.minutes(2)))
    func theExampleBuildsFromItsPkgConfigFileAndAnimatesOnTheVblanks() throws {
        let daemon = try DaemonProcess(hertz: Double(Self.hertz), logLevel: "warning")
        defer { daemon.stop() }
        let prefix = try AdapterCheck.install(into: daemon.directory)
        let lib = prefix.appendingPathComponent("lib")
        for path in ["include/vsync/vsync-qt.h", "lib/pkgconfig/vsync-qt.pc"] {
            #expect(FileManager.default.fileExists(atPath: prefix.appendingPathComponent(path).path), "\(path) not installed")
        }
        let work = daemon.directory
        try FileManager.default.copyItem(at: LibvsyncTests.repository.appendingPathComponent("examples/vsync-qt.cpp"),
                                         to: work.appendingPathComponent("vsync-qt.cpp"))
        let build = try Command.run(["sh", "-c", "cd '\(work.path)' && c++ -std=c++17 -fPIC vsync-qt.cpp "
                                     + "$(pkg-config --cflags --libs vsync-qt Qt6Quick) -o vsync-qt"],
                                    environment: ["PKG_CONFIG_PATH": lib.appendingPathComponent("pkgconfig").path])
        try #require(build.status == 0, "the README's c++ line failed: \(build.output)")
        let run = try Command.run([work.appendingPathComponent("vsync-qt").path, "--socket", daemon.socketPath, "--frames", "20"],
                                  environment: try Self.environment(work, ["LD_LIBRARY_PATH": lib.path]))
        #expect(run.status == 0, "\(run.output)")
        // "vblank S at T s on primary: rotation R"
        let frames = run.output.split(separator: "\n").filter { $0.hasPrefix("vblank ") }.compactMap { line -> (Double, Double)? in
            let w = line.split(separator: " ")
            guard w.count == 9, let t = Double(w[3]), let r = Double(w[8]) else { return nil }
            return (t, r)
        }
        #expect(frames.count == 20, "\(run.output)")
        guard let first = frames.first else { return }
        for (t, r) in frames {
            // 0.18° per ms; the animation's clock truncates to the ms (0.18°) and the example
            // prints hundredths of a degree.
            let turned = (r - first.1 + 360).truncatingRemainder(dividingBy: 360), elapsedMs = (t - first.0) * 1000
            #expect(abs(turned - elapsedMs * 0.18) < 0.18 + 0.01, "at \(t) s: turned \(turned)° in \(elapsedMs) ms: \(run.output)")
        }
    }

    /// A version 1 trace of displays on exact grids at whole rates, `seconds` long: SYNTHETIC.
    static func trace(_ displays: [(connector: String, hertz: Int)], seconds: Int) -> String {
        var lines = ["vsync-trace 1", "# SYNTHETIC: written by LibvsyncQtTests, displays on exact grids at whole rates"]
        let start: UInt64 = 1_000_000_000
        var vblanks: [(time: UInt64, line: String)] = []
        for (i, d) in displays.enumerated() {
            lines.append("display \(i + 1) /dev/dri/card0 \(40 + i) \(d.connector)")
            lines.append("mode \(start) \(i + 1) 1920x1080 \(d.hertz)/1")
            for k in 1..<UInt64(seconds * d.hertz) {
                let time = start + k * 1_000_000_000 / UInt64(d.hertz)
                vblanks.append((time, "vblank \(i + 1) \(k) \(time)"))
            }
        }
        return (lines + vblanks.sorted { $0.time < $1.time }.map(\.line)).joined(separator: "\n") + "\n"
    }
}
