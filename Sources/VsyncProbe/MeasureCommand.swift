import ArgumentParser
import VsyncDRM

/// `vsync-probe measure`: waits N vblanks on one CRTC (or, with --all, on every active CRTC of
/// every card together) and compares the kernel's timing with the mode's.
struct MeasureCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "measure",
        abstract: "Wait for vblanks on one CRTC (or all) and report nominal vs measured refresh, jitter and wake-up latency."
    )

    enum Method: String, ExpressibleByArgument, CaseIterable {
        case sequence, waitvblank
        var vblank: VBlankMethod { self == .sequence ? .crtcSequence : .waitVBlank }
    }

    @Option(help: "DRM primary node (default: the first card with an active CRTC).")
    var device: String?

    @Option(help: "CRTC object id (default: the first active CRTC). See `vsync-probe list`.")
    var crtc: UInt32?

    @Option(help: "Number of vblanks to wait for.")
    var frames: Int = 300

    @Option(help: "Force the vblank API: sequence (drmCrtcQueueSequence) or waitvblank (drmWaitVBlank).")
    var method: Method?

    @Flag(help: "Measure every active CRTC of every card together (one report each; JSON: {\"crtcs\": [...]}).")
    var all = false

    @Flag(help: "Print one JSON object.")
    var json = false

    /// `--all --json`: one report per CRTC.
    struct AllReport: Encodable { var crtcs: [MeasureReport] }

    func validate() throws {
        guard frames >= 3 else { throw ValidationError("--frames must be at least 3") }
        if all && (device != nil || crtc != nil) {
            throw ValidationError("--all measures every active CRTC: leave out --device and --crtc")
        }
    }

    func run() throws {
        if all { return try runAll() }
        do {
            let target = try Target.select(device: device, crtcID: crtc, method: method?.vblank)
            let start = VBlankRecorder.clockPair()
            let samples = try VBlankRecorder.record(card: target.card, crtc: target.crtc, frames: frames)
            let clocks = (start, VBlankRecorder.clockPair())
            guard let report = MeasureReport(target: target, samples: samples, method: target.card.vblankMethod, clocks: clocks) else {
                throw Failure.exit(
                    "could not fit the vblank timestamps from \(target.card.path) CRTC \(target.crtc.id): the mode has no refresh or the timestamps did not advance"
                )
            }
            if json { try Output.json(report) } else { report.text.forEach(Output.line) }
        } catch let error as DRMError {
            // VsyncDRM's lines name no tool's flags; measure says how to pick another CRTC.
            switch error.kind {
            case .crtcOff, .timedOut: throw Failure.exit(error.description + "; measure another with --crtc ID")
            default: throw Failure.exit(error)
            }
        }
    }

    func runAll() throws {
        do {
            let targets = try Target.all(method: method?.vblank)
            let start = VBlankRecorder.clockPair()
            let samples = try VBlankRecorder.record(targets: targets, frames: frames)
            let clocks = (start, VBlankRecorder.clockPair())
            let reports = try zip(targets, samples).map { target, samples in
                guard let report = MeasureReport(target: target, samples: samples, method: target.card.vblankMethod, clocks: clocks) else {
                    throw Failure.exit(
                        "could not fit the vblank timestamps from \(target.card.path) CRTC \(target.crtc.id): the mode has no refresh or the timestamps did not advance"
                    )
                }
                return report
            }
            if json {
                try Output.json(AllReport(crtcs: reports))
            } else {
                for (i, report) in reports.enumerated() {
                    if i > 0 { Output.line("") }
                    report.text.forEach(Output.line)
                }
            }
        } catch let error as DRMError {
            switch error.kind {
            case .crtcOff, .timedOut:
                throw Failure.exit(error.description + "; a CRTC went off while measuring: measure the others with --device and --crtc")
            default: throw Failure.exit(error)
            }
        }
    }
}
