import ArgumentParser
import Glibc
import VsyncCore
import VsyncDRM

/// `vsync-probe record`: writes what the kernel gives (every vblank of every lit CRTC, modes,
/// on/off) as a vsync trace (`VBlankTrace`), for `vsyncd --source replay:FILE` and bug reports.
struct RecordCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "record",
        abstract: "Record every vblank, mode and on/off of the displays as a trace vsyncd can replay.",
        discussion: """
            The trace is text, one line per event, in the format described in vsync-probe(1) \
            (TRACE FORMAT). Replay it with `vsyncd --source replay:FILE`. Mode changes \
            and CRTCs going on or off are noticed within half a second.
            """
    )

    @Option(help: "DRM primary node (default: every card).")
    var device: String?

    @Option(help: "Record only this CRTC object id (default: all). See `vsync-probe list`.")
    var crtc: UInt32?

    @Option(help: "How long to record, in seconds.")
    var seconds: Double = 10

    @Option(help: "Write the trace here ('-': standard output).")
    var out: String

    @Option(help: "Also write the recording as Chrome trace-event JSON here, for Perfetto's UI (ui.perfetto.dev).")
    var traceOut: String?

    func validate() throws {
        guard seconds > 0, seconds <= 86_400 else { throw ValidationError("--seconds must be above 0 and at most 86400") }
    }

    func run() throws {
        let file = out == "-" ? fdopen(1, "w") : fopen(out, "w")
        guard let file else {
            throw Failure.exit("cannot write the trace to \(out): \(String(cString: strerror(errno))); give a writable --out path")
        }
        // The lines are kept for --trace-out, which is written from the whole recording.
        let lines = LineCollector(keep: traceOut != nil)
        let failure = Self.record(device: device, crtcID: crtc, seconds: seconds) {
            fputs($0 + "\n", file)
            lines.add($0)
        }
        let written = fflush(file) == 0 && ferror(file) == 0
        if out != "-" { fclose(file) }
        if let failure { throw Failure.exit(failure) }
        guard written else { throw Failure.exit("writing the trace to \(out) failed: \(String(cString: strerror(errno)))") }
        if let traceOut {
            let trace: VBlankTrace
            do { trace = try VBlankTrace(parsing: lines.text) } catch {
                throw Failure.exit("the recording does not read back as a trace (\(error.description)): please report this")
            }
            guard let json = fopen(traceOut, "w") else {
                throw Failure.exit("cannot write the trace-event JSON to \(traceOut): \(String(cString: strerror(errno)))")
            }
            fputs(TraceEventJSON.encode(trace), json)
            let ok = fflush(json) == 0 && ferror(json) == 0
            fclose(json)
            guard ok else { throw Failure.exit("writing the trace-event JSON to \(traceOut) failed: \(String(cString: strerror(errno)))") }
        }
    }

    private static func record(device: String?, crtcID: UInt32?, seconds: Double, emit: @escaping (String) -> Void) -> DRMError? {
        do {
            var recorder = try TraceRecorder(device: device, crtcID: crtcID, emit: emit)
            try recorder.run(seconds: seconds)
            return nil
        } catch {
            return error
        }
    }
}

/// The trace's lines, kept when --trace-out needs them.
final class LineCollector {
    private let keep: Bool
    private var lines: [String] = []
    init(keep: Bool) { self.keep = keep }
    func add(_ line: String) { if keep { lines.append(line) } }
    var text: String { lines.joined(separator: "\n") + "\n" }
}

/// The recording loop: keeps every lit CRTC's vblank queue full, writes each event, and
/// re-reads the CRTCs twice a second to catch mode changes and on/off.
struct TraceRecorder {
    private struct Watched {
        var display: VBlankTrace.Display
        var card: Card
        var state: Mode?  // nil: off
        var announced = false
        var queued = false
        var variableRefresh = RecordedVariableRefresh()
    }

    private var cards: [Card] = []
    private var watched: [Watched] = []
    private let emit: (String) -> Void

    init(device: String?, crtcID: UInt32?, emit: @escaping (String) -> Void) throws(DRMError) {
        self.emit = emit
        let paths = device.map { [$0] } ?? Card.primaryNodePaths()
        guard !paths.isEmpty else { throw DRMError(kind: .noDevice, errno: 0, device: "/dev/dri", operation: "scan") }
        var uts = utsname()
        uname(&uts)
        let release = withUnsafeBytes(of: &uts.release) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        emit(VBlankTrace.header)
        emit("# recorded by vsync-probe \(VsyncVersion.string) on Linux \(release); synthetic: no")
        for path in paths {
            let card = try Card(path: path)
            let resources = try card.resources()
            emit("# \(path): driver \(card.driverName), \(card.hasMonotonicTimestamps ? "CLOCK_MONOTONIC" : "CLOCK_REALTIME") timestamps")
            cards.append(card)
            for c in resources.crtcs where crtcID == nil || c.id == crtcID {
                let display = VBlankTrace.Display(
                    id: UInt32(watched.count + 1), device: path, crtcID: c.id,
                    connector: resources.connectors(of: c).first?.name ?? "-")
                emit(VBlankTrace.line(display))
                watched.append(Watched(display: display, card: card, state: nil))
            }
        }
        if let crtcID, watched.isEmpty {
            throw DRMError(
                kind: .unknownCRTC(crtcID: crtcID, valid: cards.flatMap(\.crtcIDs)), errno: 0,
                device: paths[0], operation: "lookup")
        }
    }

    mutating func run(seconds: Double) throws(DRMError) {
        let start = VBlankRecorder.now(CLOCK_MONOTONIC)
        let end = start + UInt64(seconds * 1e9)
        var nextScan = start
        var pfds = cards.map { pollfd(fd: $0.fileDescriptor, events: Int16(POLLIN), revents: 0) }
        var events: [VBlankEvent] = []
        while true {
            let now = VBlankRecorder.now(CLOCK_MONOTONIC)
            if now >= end { break }
            if now >= nextScan {
                rescan(now: now)
                nextScan = now + 500_000_000
            }
            let waitMs = Int32(max(1, min(end, nextScan) / 1_000_000 - now / 1_000_000))
            for i in pfds.indices { pfds[i].revents = 0 }
            let ready = poll(&pfds, nfds_t(pfds.count), waitMs)
            if ready < 0 {
                if errno == EINTR { continue }
                throw DRMError.from(errno: errno, device: cards.first?.path ?? "/dev/dri", operation: "poll")
            }
            for (i, pfd) in pfds.enumerated() where pfd.revents != 0 {
                events.removeAll(keepingCapacity: true)
                try cards[i].readEvents(into: &events)
                for e in events {
                    guard let w = watched.firstIndex(where: { $0.card === cards[i] && $0.display.crtcID == e.crtcID }) else { continue }
                    emit(VBlankTrace.line(.vblank(display: watched[w].display.id, sequence: e.sequence, timestampNs: e.timestampNs)))
                    watched[w].variableRefresh.pollEnabled(
                        card: cards[i], crtcID: e.crtcID, display: watched[w].display.id,
                        now: e.timestampNs, emit: emit)
                    refill(w)
                }
            }
        }
    }

    /// Writes a mode or off line for each CRTC whose state changed, and queues vblanks on the lit ones.
    private mutating func rescan(now: UInt64) {
        for card in cards {
            guard let resources = try? card.resources() else { continue }
            for c in resources.crtcs {
                guard let w = watched.firstIndex(where: { $0.card === card && $0.display.crtcID == c.id }) else { continue }
                let mode = c.mode.flatMap { $0.refreshRate == nil ? nil : $0 }
                if mode != watched[w].state || !watched[w].announced {
                    watched[w].announced = true
                    watched[w].state = mode
                    let id = watched[w].display.id
                    if let mode, let rate = mode.refreshRate {
                        emit(
                            VBlankTrace.line(
                                .mode(
                                    timeNs: now, display: id, width: mode.timings.hdisplay,
                                    height: mode.timings.vdisplay, refresh: rate)))
                    } else {
                        emit(VBlankTrace.line(.off(timeNs: now, display: id)))
                    }
                }
                watched[w].variableRefresh.update(
                    card: card, crtcID: c.id, connectorID: resources.connectors(of: c).first?.id,
                    display: watched[w].display.id, now: now, emit: emit)
                if mode != nil { refill(w) }
            }
        }
    }

    private mutating func refill(_ w: Int) {
        do throws(DRMError) {
            try watched[w].card.fillVBlankQueue(crtcID: watched[w].display.crtcID, token: UInt32(watched[w].display.id))
        } catch {
            // Off (or going): the next rescan writes the off line.
        }
    }
}
