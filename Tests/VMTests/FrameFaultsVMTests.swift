import Foundation
import TestSupport
import Testing
import VsyncCore

/// The four injected faults of a frame, on vkms in the VM test bed: a real app process
/// (Tests/TestBed/frame-faults-app) follows the display with a FrameMonitor, its Perfetto trace
/// and a HangDetector, while it sleeps past its target once, vsyncd is stopped (SIGSTOP) for
/// 50 ms, the app hangs 300 ms in a known function, and the display's mode changes. Its report
/// names each late frame's reason and the hung function, while it hangs; the trace, brought
/// back from the guest, decodes packet by packet with Perfetto's definitions. Each fault waits
/// for the app to have shown the one before it and run 20 frames past it, so no fault's frame is
/// another's: they are told apart by vblank sequence, never by time.
@Suite(.serialized)
struct FrameFaultsVMTests {
    /// One `frame` line of the app: a callback as it began.
    struct AppFrame {
        var target: UInt64
        var sequence: UInt64
        var generation: UInt32
        var periodNs: UInt64
        var vblankNs: UInt64
        var startNs: UInt64
    }

    /// The app's lines (`@@app`), read.
    struct AppReport {
        let lines: [String]
        var frames: [AppFrame] = []
        var late: [(target: UInt64, reason: String)] = []
        var slept: UInt64?

        init(_ lines: [String]) {
            self.lines = lines
            for line in lines {
                let fields = Self.fields(line)
                if line.hasPrefix("frame "), let t = fields["target"].flatMap(UInt64.init), let s = fields["seq"].flatMap(UInt64.init),
                    let g = fields["gen"].flatMap(UInt32.init), let p = fields["period"].flatMap(UInt64.init),
                    let v = fields["vblank"].flatMap(UInt64.init), let start = fields["start"].flatMap(UInt64.init)
                {
                    frames.append(AppFrame(target: t, sequence: s, generation: g, periodNs: p, vblankNs: v, startNs: start))
                } else if line.hasPrefix("late "), let t = fields["target"].flatMap(UInt64.init), let r = fields["reason"] {
                    late.append((t, r))
                } else if line.hasPrefix("slept ") {
                    slept = fields["target"].flatMap(UInt64.init)
                }
            }
        }

        static func fields(_ line: String) -> [String: String] {
            var fields: [String: String] = [:]
            for word in line.split(separator: " ") {
                let pair = word.split(separator: "=", maxSplits: 1)
                if pair.count == 2 { fields[String(pair[0])] = String(pair[1]) }
            }
            return fields
        }

        func reasons(_ target: UInt64) -> [String] { late.filter { $0.target == target }.map(\.reason) }
        func index(_ prefix: String) -> Int? { lines.firstIndex { $0.hasPrefix(prefix) } }
    }

    static let newModeHz = 75.0

    @Test func eachInjectedFaultGetsItsReasonAndTheTraceDecodes() async throws {
        // The release vsyncd: a debug build's own cost per tick under TCG makes nearly every
        // frame late, and the stopped daemon's frame would then be late like any other.
        var script = try VsyncdGuestScript(release: true)
        // The guest's timers on the host's TSC rate: the app's 50 ms stop and frame times are the
        // guest's, not a 250 Hz tick's (see VsyncdGuestScript.hostTSC).
        script.hostTSC = true
        // The app's release build as well: under TCG a debug build's frames, and its hang
        // detector's symbolizing, are so slow that they, not the faults, make its frames late.
        let app: String
        do { app = try GuestVM.releaseProductPath("frame-faults-app") } catch {
            throw VsyncdVMError("\(error) (for this helper: swift build -c release --product frame-faults-app, as Scripts/test.sh does)")
        }
        script.shell("vsyncd_start")
        script.shell(
            #"'\#(app)' --socket "$VSYNCD_SOCK" --trace /tmp/app.pftrace >/tmp/c.app.out 2>/tmp/c.app.err & PID_app=$!; CLIENTS="${CLIENTS:-} app""#)
        // `after N`: until the app began N frames more than it has now.
        script.shell(#"after() { n=$(grep -c '^frame ' /tmp/c.app.out); wait_line app '^frame ' $((n + $1)); }"#)
        script.shell("wait_line app '^frame ' 30")
        // 1. The app sleeps past its target.
        script.shell("kill -USR1 $PID_app; wait_line app '^slept '; after 20")
        // 2. vsyncd stopped 50 ms (the sleep is the fault itself), from one process that reads the
        // clock as it stops vsyncd and before it lets it go on: a shell's marks and sleep would
        // fork in between and stretch the stop under TCG.
        script.shell(#"python3 -c 'import os, signal, sys, time; now = lambda: time.clock_gettime_ns(time.CLOCK_MONOTONIC); pid = int(sys.argv[1]); stop = now(); os.kill(pid, signal.SIGSTOP); time.sleep(0.05); cont = now(); os.kill(pid, signal.SIGCONT); print("@@mark stop", stop); print("@@mark cont", cont)' "$VSYNCD"; after 20"#)
        // 3. The app hangs 300 ms in simulatedHangInKnownFunction.
        script.shell("kill -USR2 $PID_app; wait_line app '^hang returned'; after 20")
        // 4. The display's mode changes, held until the end (the mark first: vsyncd may tell the
        // app before the helper says it is done).
        script.shell("mark mode; hold \(Int(Self.newModeHz)); after 60")
        script.shell("stop app TERM; release; vsyncd_stop; dump")
        // The trace back to the host, as one line of base64 (the guest's writes stay in the guest).
        script.shell("echo \"@@trace $(base64 -w 0 /tmp/app.pftrace)\"")
        let out = try await script.run(timeout: 400)
        #expect(out.result.status == 0 && out.errors.isEmpty && out.status("vsyncd") == 0, "\(out)")
        #expect(out.status("app") == 0, "app: \(out.all("app.err"))")

        let report = AppReport(out.all("app"))
        let lateText = report.late.map { "\($0.target): \($0.reason)" }.joined(separator: ", ")
        try #require(report.frames.count > 150, "the app began \(report.frames.count) frames: \(out.all("app.err"))")
        // 1. The frame that slept: the app's missed deadline.
        let slept = try #require(report.slept, "the app never slept: \(report.lines.suffix(5))")
        #expect(report.reasons(slept) == ["appDeadlineMissed"], "frame for vblank \(slept): \(report.reasons(slept)); late frames: \(lateText)")
        // 2. The first frame begun after vsyncd went on: delivered late.
        let stopped = try #require(out.mark("stop")), continued = try #require(out.mark("cont"))
        let resumed = try #require(report.frames.first { $0.startNs >= continued }, "no frame after vsyncd continued")
        let beforeStop = try #require(report.frames.last { $0.startNs < stopped })
        #expect(resumed.target > slept && report.reasons(resumed.target) == ["deliveryLate"],
                "frame for vblank \(resumed.target): \(report.reasons(resumed.target)); late frames: \(lateText)")
        // 3. The hang: a stack taken while it lasted (detected before it returned, and still
        // stuck once the stack was in) names the function, and the report reached the app's
        // handler before the hung function returned; then it ended.
        let returned = try #require(report.index("hang returned"), "the hang never returned: \(report.lines.suffix(5))")
        let hangEnd = try #require(AppReport.fields(report.lines[returned])["end"].flatMap { UInt64($0) })
        let began = try #require(
            report.lines.first { $0.hasPrefix("hang began context=drawing kind=running named=yes") },
            "no report naming the function: \(report.lines.filter { $0.hasPrefix("hang") })")
        let detected = try #require(AppReport.fields(began)["detected"].flatMap { UInt64($0) })
        let sent = try #require(AppReport.fields(began)["reported"].flatMap { UInt64($0) })
        let beforeEnd = { (ns: UInt64) in String(format: "%.1f", (Double(hangEnd) - Double(ns)) / 1e6) }
        #expect(detected < hangEnd, "detected at \(detected), \(beforeEnd(detected)) ms before the hang returned at \(hangEnd)")
        #expect(sent < hangEnd, "reported at \(sent), \(beforeEnd(sent)) ms before the hang returned at \(hangEnd)")
        print("frame faults: the hang detected \(beforeEnd(detected)) ms and reported \(beforeEnd(sent)) ms before it returned")
        #expect(report.lines[returned...].contains { $0.hasPrefix("hang ended duration=") })
        let hungFrame = try #require(report.lines[..<returned].last { $0.hasPrefix("frame ") }.flatMap { AppFrame.parse($0) })
        #expect(hungFrame.target > resumed.target && report.reasons(hungFrame.target) == ["appDeadlineMissed"],
                "the hung frame, for vblank \(hungFrame.target): \(report.reasons(hungFrame.target))")
        // 4. The mode change: the first frame on a generation after the hold's is a mode change's,
        // and from there the frames are the new mode's.
        let mode = try #require(out.mark("mode"))
        let heldAt = try #require(report.frames.lastIndex { $0.startNs < mode }, "no frame before the mode change")
        let firstNew = try #require(
            report.frames[heldAt...].indices.dropFirst().first { report.frames[$0].generation != report.frames[$0 - 1].generation },
            "no new generation after the mode change: \(report.frames[heldAt...].map(\.generation))")
        let newFrame = report.frames[firstNew]
        #expect(newFrame.target > hungFrame.target && report.reasons(newFrame.target) == ["modeChange"],
                "first frame of the new mode, for vblank \(newFrame.target): \(report.reasons(newFrame.target)); late frames: \(lateText)")
        let newPeriod = customModePeriodNs(Self.newModeHz)
        let lastPeriod = Double(try #require(report.frames.last).periodNs)
        #expect(abs(lastPeriod / newPeriod - 1) < 0.001, "the app's last period \(lastPeriod) ns, the \(Self.newModeHz) Hz mode's \(newPeriod) ns")
        print("""
            frame faults in the VM: \(report.frames.count) frames, \(report.late.count) late; slept: vblank \(slept); \
            stopped \(String(format: "%.0f", Double(continued - stopped) / 1e6)) ms after vblank target \(beforeStop.target): \
            resumed at \(resumed.target); hung at \(hungFrame.target); new mode from \(newFrame.target) \
            (generation \(report.frames[firstNew - 1].generation) → \(newFrame.generation), period \(newFrame.periodNs) ns)
            late frames by reason: \(Dictionary(grouping: report.late, by: \.reason).mapValues(\.count).sorted { $0.key < $1.key }); \
            hangs reported: \(report.lines.filter { $0.hasPrefix("hang began") }.count); \
            callback after its vblank, ms p50/p99: \(Self.percentiles(report.frames.map { (Double($0.startNs) - Double($0.vblankNs)) / 1e6 }))
            """)

        let encoded = try #require(out.all("trace").first, "no trace came back")
        let bytes = try #require(Data(base64Encoded: encoded), "the trace's base64 does not decode (\(encoded.count) characters)")
        try Self.checkTrace(
            [UInt8](bytes), report: report,
            faults: [
                ("the app slept past its target", slept, .appDeadlineMissed), ("vsyncd stopped 50 ms", resumed.target, .deliveryLate),
                ("the app hung 300 ms", hungFrame.target, .appDeadlineMissed), ("the mode changed", newFrame.target, .modeChange),
            ])
    }
}

extension FrameFaultsVMTests {
    static func percentiles(_ values: [Double]) -> String {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return "-" }
        let at = { (p: Double) in sorted[min(sorted.count - 1, Int(Double(sorted.count - 1) * p + 0.5))] }
        return String(format: "%.1f/%.1f", at(0.5), at(0.99))
    }
}

extension FrameFaultsVMTests.AppFrame {
    static func parse(_ line: String) -> Self? { FrameFaultsVMTests.AppReport([line]).frames.first }
}
