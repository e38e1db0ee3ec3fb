import Glibc
import VsyncClientCore
import VsyncCore

/// One `follow` run: the client core's events turned into output lines and a summary. It runs
/// on the follow loop's thread alone (the core owns no thread), so it needs no lock.
struct Follower {
    let json: Bool
    let limit: Int?
    let workDurationNs: UInt64
    private(set) var ticks = 0
    private(set) var skipped = 0
    private var firstTimestampNs: UInt64 = 0
    private var lastTimestampNs: UInt64 = 0
    private var latenciesUs: [Double] = []
    /// targetTimestamp − receipt: how long the app had before its target vblank.
    private var leadsUs: [Double] = []
    private var durationNs: UInt64 = 0
    private var synthetic = false
    private(set) var refreshMillihertz: UInt64 = 0
    /// The subscription waits for its display (not there, or dark after a removal).
    private var waiting = false
    /// Set when the run cannot go on: nothing will ever tick.
    private(set) var fatal: ClientError?
    /// Each tick's frame judged as an app's that does no work (FrameJankTracker's rules).
    private var jank = FrameJankTracker()
    private(set) var late: [FrameJankReason: Int] = [:]
    /// `--trace-out`'s Perfetto trace.
    var trace: FollowTrace?

    init(json: Bool, limit: Int?, workDurationNs: UInt64 = 0) {
        self.json = json
        self.limit = limit
        self.workDurationNs = workDurationNs
    }

    var isDone: Bool { fatal != nil || limit.map { ticks >= $0 } ?? false }

    mutating func handle(_ event: ClientEvent) {
        guard !isDone else { return }
        switch event {
        case .frame(let frame): tick(frame)
        case .subscribed(let answer) where answer.isWaiting:
            waiting = true
            Output.line(json ? "{\"event\":\"waiting\"}" : "waiting for the display to appear")
        case .subscribed(let answer):
            waiting = false
            refreshMillihertz = answer.display.refreshMillihertz
            if answer.display.flags.contains(.synthetic) { synthetic = true }
        case .display(_, let change): displayChanged(change)
        case .error(_, let error): failed(error)
        case .connected: jank.reset()
        }
    }

    private mutating func tick(_ frame: ClientFrame) {
        let latencyUs = Double(Int64(bitPattern: frame.receivedNs &- frame.timestampNs)) / 1000
        ticks += 1
        if ticks == 1 { firstTimestampNs = frame.timestampNs } else { skipped += Int(frame.skipped) }
        lastTimestampNs = frame.timestampNs
        latenciesUs.append(latencyUs)
        let leadUs = Double(Int64(bitPattern: frame.targetTimestampNs &- frame.receivedNs)) / 1000
        leadsUs.append(leadUs)
        durationNs = frame.displayIntervalNs
        if frame.flags.contains(.synthetic) { synthetic = true }
        // The probe's work for a frame is nothing: it begins and ends as the tick is read.
        let tick = FrameTick(
            sequence: frame.sequence, timestampNs: frame.timestampNs, targetSequence: frame.targetSequence,
            targetTimestampNs: frame.targetTimestampNs, periodNs: frame.displayIntervalNs, divisor: UInt64(frame.divisor),
            workDurationNs: workDurationNs, flags: frame.flags, generation: frame.generation,
            startNs: frame.receivedNs, endNs: frame.receivedNs)
        let (facts, verdict) = jank.frame(tick)
        if verdict.isLate { late[verdict.reason, default: 0] += 1 }
        trace?.record(tick, facts: facts, jank: verdict)
        Output.line(
            Self.line(frame, latencyUs: latencyUs, leadUs: leadUs, workDurationNs: workDurationNs, reason: verdict.reason, json: json))
    }

    static func line(
        _ f: ClientFrame, latencyUs: Double, leadUs: Double, workDurationNs: UInt64, reason: FrameJankReason = .onTime, json: Bool
    ) -> String {
        if json {
            let timelines = f.timelines.map { "{\"seq\":\($0.sequence),\"presentationTimestamp\":\(seconds($0.presentationNs))}" }
            return "{\"seq\":\(f.sequence),\"timestamp\":\(seconds(f.timestampNs)),"
                + "\"targetTimestamp\":\(seconds(f.targetTimestampNs)),\"duration\":\(seconds(f.displayIntervalNs)),"
                + "\"timestampNs\":\(f.timestampNs),\"targetTimestampNs\":\(f.targetTimestampNs),\"targetSequence\":\(f.targetSequence),"
                + "\"durationNs\":\(f.displayIntervalNs),\"skipped\":\(f.skipped),\"flags\":[\(flagNames(f.flags).map { "\"\($0)\"" }.joined(separator: ","))],"
                + "\"latencyUs\":\(fixed(latencyUs, 1)),\"leadUs\":\(fixed(leadUs, 1)),\"workDurationUs\":\(fixed(Double(workDurationNs) / 1000, 1)),"
                + "\"timelines\":[\(timelines.joined(separator: ","))],\"generation\":\(f.generation),\"reason\":\"\(reason.name)\"}"
        }
        let flags = flagNames(f.flags).joined(separator: ",")
        return "seq \(f.sequence)  t \(seconds(f.timestampNs))  target \(f.targetSequence) at \(seconds(f.targetTimestampNs))"
            + "  duration \(fixed(Double(f.displayIntervalNs) / 1e6, 3)) ms"
            + "  skipped \(f.skipped)  flags \(flags.isEmpty ? "-" : flags)  latency \(fixed(latencyUs, 0)) µs  lead \(fixed(leadUs, 0)) µs"
            + "  generation \(f.generation)  reason \(reason.name)"
    }

    /// A display change as one line: `{"event":"modeChanged","refreshHz":144.000235,"generation":7}`, or text.
    /// `added` is any display vsyncd found, not only this subscription's.
    private mutating func displayChanged(_ event: DisplayEvent) {
        let name: String
        var hz: Double?
        switch event.kind {
        case .modeChanged:
            name = "modeChanged"
            refreshMillihertz = event.display.refreshMillihertz
            hz = Double(event.display.refreshMillihertz) / 1000
        case .off: name = "off"
        case .on: name = "on"
        case .added: name = "added"
        case .removed: name = "removed"
        case .variableRefreshChanged: name = "variableRefreshChanged"
        }
        // Protocol 5: whether VRR is on with its interval range, and the clock pair the event
        // was stamped with (CLOCK_MONOTONIC, CLOCK_REALTIME).
        let d = event.display
        let variable = d.flags.contains(.variable)
        if json {
            Output.line(
                "{\"event\":\"\(name)\"" + (hz.map { ",\"refreshHz\":\(Self.fixed($0, 6))" } ?? "")
                    + ",\"generation\":\(d.generation),\"variable\":\(variable),\"minIntervalNs\":\(d.minIntervalNs),\"maxIntervalNs\":\(d.maxIntervalNs)"
                    + (d.clock.map { ",\"monotonicNs\":\($0.monotonicNs),\"realtimeNs\":\($0.realtimeNs)" } ?? "") + "}")
        } else {
            let vrr =
                variable
                ? "  variable \(Self.fixed(Double(d.minIntervalNs) / 1e6, 3))-\(Self.fixed(Double(d.maxIntervalNs) / 1e6, 3)) ms" : ""
            Output.line(
                "display " + name + (hz.map { " \(Self.fixed($0, 6)) Hz" } ?? "") + "  generation \(d.generation)" + vrr
                    + (d.clock.map { "  clocks \(Self.seconds($0.monotonicNs)) = realtime \(Self.seconds($0.realtimeNs))" } ?? ""))
        }
    }

    static func flagNames(_ flags: TickFlags) -> [String] {
        var names: [String] = []
        if flags.contains(.hardwareTimestamp) { names.append("hardware") }
        if flags.contains(.predicted) { names.append("predicted") }
        if flags.contains(.synthetic) { names.append("synthetic") }
        if flags.contains(.variable) { names.append("variable") }
        if flags.contains(.modelTimed) { names.append("modelTimed") }
        return names
    }

    static func seconds(_ ns: UInt64) -> String {
        let frac = String(ns % 1_000_000_000)
        return "\(ns / 1_000_000_000).\(String(repeating: "0", count: 9 - frac.count))\(frac)"
    }

    static func fixed(_ value: Double, _ decimals: Int) -> String { DecimalText.fixed(value, places: decimals) }

    /// Errors that end the run: nothing will ever tick. Others (daemon restarted) are warnings.
    private mutating func failed(_ error: ClientError) {
        switch error {
        case .connectionFailed(_, let errno) where errno == ETIMEDOUT:
            // No answer yet, not no daemon: the client keeps trying (a slow socket-activated start).
            break
        case .noDaemon, .permissionDenied, .refused, .displayNotFound, .connectionFailed:
            // Before the first tick these mean the run cannot start; later the client retries.
            if ticks == 0 {
                fatal = error
                return
            }
        case .displayGone:
            fatal = error
            return
        case .connectionLost, .requestFailed, .protocolViolation:
            break
        }
        Output.error("vsync-probe: warning: \(error.description)")
    }

    /// The display's refresh rounded to whole frames per second (CADisplayLink's maximumFramesPerSecond).
    var maximumFramesPerSecond: Int {
        refreshMillihertz > 0
            ? Int((Double(refreshMillihertz) / 1000).rounded())
            : durationNs > 0 ? Int((1e9 / Double(durationNs)).rounded()) : 0
    }

    /// The late frames' reasons in the enum's order, with their counts.
    private var lateNames: [(name: String, count: Int)] {
        FrameJankReason.allCases.compactMap { r in late[r].map { (r.name, $0) } }
    }

    func printSummary(requested: String, display: String) {
        let span = Double(lastTimestampNs &- firstTimestampNs) / 1e9
        // Rate from the vblank timestamps: ticks after the first over the time they span.
        let achieved = ticks > 1 && span > 0 ? Double(ticks - 1) / span : 0
        let latency = Percentiles(latenciesUs)
        let lead = Percentiles(leadsUs)
        let refresh = maximumFramesPerSecond
        if json {
            func stats(_ p: Percentiles?) -> String {
                p.map { "{\"p50\":\(Self.fixed($0.p50, 1)),\"p99\":\(Self.fixed($0.p99, 1)),\"max\":\(Self.fixed($0.max, 1))}" } ?? "null"
            }
            Output.line(
                "{\"summary\":true,\"ticks\":\(ticks),\"skipped\":\(skipped),\"achievedHz\":\(Self.fixed(achieved, 4)),"
                    + "\"requested\":\"\(requested)\",\"maximumFramesPerSecond\":\(refresh),\"durationNs\":\(durationNs),"
                    + "\"seconds\":\(Self.fixed(span, 3)),\"synthetic\":\(synthetic),\"latencyUs\":\(stats(latency)),"
                    + "\"workDurationUs\":\(Self.fixed(Double(workDurationNs) / 1000, 1)),\"leadUs\":\(stats(lead)),"
                    + "\"late\":{\(lateNames.map { "\"\($0.name)\":\($0.count)" }.joined(separator: ","))}}")
        } else if ticks == 0 && waiting {
            Output.line("summary: no tick: still waiting for \(display) (see `vsync-probe list`)")
        } else {
            Output.line(
                "summary: \(ticks) ticks over \(Self.fixed(span, 3)) s, achieved \(Self.fixed(achieved, 3)) Hz"
                    + " (requested \(requested), display \(refresh) Hz\(synthetic ? ", synthetic" : "")), skipped \(skipped)")
            let byReason = lateNames.map { "\($0.name) \($0.count)" }.joined(separator: ", ")
            Output.line("late frames: \(late.values.reduce(0, +))" + (byReason.isEmpty ? "" : " (\(byReason))"))
            if let latency {
                Output.line(
                    "latency µs: p50 \(Self.fixed(latency.p50, 0))  p99 \(Self.fixed(latency.p99, 0))  max \(Self.fixed(latency.max, 0))")
            }
            if let lead {
                Output.line(
                    "lead µs (target − receipt, work duration \(Self.fixed(Double(workDurationNs) / 1000, 0))): p50 \(Self.fixed(lead.p50, 0))  p99 \(Self.fixed(lead.p99, 0))"
                )
            }
        }
    }
}
