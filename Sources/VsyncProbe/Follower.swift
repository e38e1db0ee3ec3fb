import DisplayLink
import Foundation
import VsyncCore

/// The state of one `follow` run, touched by the link's queue, the signal handler and main.
final class Follower: Sendable {
    private struct State {
        var ticks = 0
        var skipped = 0
        var firstTimestampNs: UInt64 = 0
        var lastTimestampNs: UInt64 = 0
        var latenciesUs: [Double] = []
        var done = false
        var fatal: DisplayLinkError?
        var durationNs: UInt64 = 0
        var synthetic = false
    }

    let json: Bool
    let limit: Int?
    private let state = LockedState(State())
    private let doneSignal = DispatchSemaphore(value: 0)

    init(json: Bool, limit: Int?) {
        self.json = json
        self.limit = limit
    }

    func tick(_ link: DisplayLink) {
        guard let frame = link.currentFrame else { return }
        let latencyUs = Double(Int64(bitPattern: frame.receivedNanoseconds &- frame.timestampNanoseconds)) / 1000
        let (count, finished) = state.withLock { s -> (Int, Bool) in
            guard !s.done else { return (s.ticks, false) }
            s.ticks += 1
            if s.ticks == 1 { s.firstTimestampNs = frame.timestampNanoseconds } else { s.skipped += frame.skipped }
            s.lastTimestampNs = frame.timestampNanoseconds
            s.latenciesUs.append(latencyUs)
            s.durationNs = frame.durationNanoseconds
            s.synthetic = frame.isSynthetic
            return (s.ticks, limit.map { s.ticks >= $0 } ?? false)
        }
        if count > 0 { Output.line(Self.line(frame, latencyUs: latencyUs, json: json)) }
        if finished { finish() }
    }

    static func line(_ f: DisplayLink.Frame, latencyUs: Double, json: Bool) -> String {
        if json {
            return "{\"seq\":\(f.sequence),\"timestamp\":\(seconds(f.timestampNanoseconds)),"
                + "\"targetTimestamp\":\(seconds(f.targetTimestampNanoseconds)),\"duration\":\(seconds(f.durationNanoseconds)),"
                + "\"timestampNs\":\(f.timestampNanoseconds),\"targetTimestampNs\":\(f.targetTimestampNanoseconds),"
                + "\"durationNs\":\(f.durationNanoseconds),\"skipped\":\(f.skipped),\"flags\":[\(flagNames(f.flags).map { "\"\($0)\"" }.joined(separator: ","))],"
                + "\"latencyUs\":\(fixed(latencyUs, 1))}"
        }
        let flags = flagNames(f.flags).joined(separator: ",")
        return "seq \(f.sequence)  t \(seconds(f.timestampNanoseconds))  target \(seconds(f.targetTimestampNanoseconds))"
            + "  interval \(fixed(f.interval * 1000, 3)) ms  duration \(fixed(f.duration * 1000, 3)) ms"
            + "  skipped \(f.skipped)  flags \(flags.isEmpty ? "-" : flags)  latency \(fixed(latencyUs, 0)) µs"
    }

    /// A display change as one line: `{"event":"modeChanged","refreshHz":144.000235}`, or text.
    func displayChanged(_ change: DisplayLink.DisplayChange) {
        let (name, hz): (String, Double?) = switch change {
        case .modeChanged(let refreshHz): ("modeChanged", refreshHz)
        case .off: ("off", nil)
        case .on: ("on", nil)
        }
        if json {
            Output.line("{\"event\":\"\(name)\"" + (hz.map { ",\"refreshHz\":\(Self.fixed($0, 6))" } ?? "") + "}")
        } else {
            Output.line("display " + name + (hz.map { " \(Self.fixed($0, 6)) Hz" } ?? ""))
        }
    }

    static func flagNames(_ flags: DisplayLink.Flags) -> [String] {
        var names: [String] = []
        if flags.contains(.hardwareTimestamp) { names.append("hardware") }
        if flags.contains(.predicted) { names.append("predicted") }
        if flags.contains(.synthetic) { names.append("synthetic") }
        return names
    }

    static func seconds(_ ns: UInt64) -> String {
        "\(ns / 1_000_000_000).\(String(ns % 1_000_000_000).leftPadded(to: 9))"
    }

    static func fixed(_ value: Double, _ decimals: Int) -> String { String(format: "%.\(decimals)f", value) }

    /// Errors that end the run: nothing will ever tick. Others (daemon restarted) are warnings.
    func failed(_ error: DisplayLinkError) {
        let fatal = state.withLock { s -> Bool in
            switch error {
            case .noDaemon, .permissionDenied, .refused, .displayNotFound, .connectionFailed:
                // Before the first tick these mean the run cannot start; later the link retries.
                guard s.ticks == 0 else { return false }
            case .displayGone:
                break
            case .connectionLost, .requestFailed, .protocolViolation:
                return false
            }
            if s.fatal == nil { s.fatal = error }
            return true
        }
        if fatal {
            finish()
        } else {
            FileHandle.standardError.write(Data("vsync-probe: warning: \(error.description)\n".utf8))
        }
    }

    var fatalError: DisplayLinkError? { state.withLock { $0.fatal } }

    func finish() {
        let first = state.withLock { s -> Bool in
            defer { s.done = true }
            return !s.done
        }
        if first { doneSignal.signal() }
    }

    func waitUntilDone() { doneSignal.wait() }

    func printSummary(link: DisplayLink, requested: String) {
        let s = state.withLock { $0 }
        let span = Double(s.lastTimestampNs &- s.firstTimestampNs) / 1e9
        // Rate from the vblank timestamps: ticks after the first over the time they span.
        let achieved = s.ticks > 1 && span > 0 ? Double(s.ticks - 1) / span : 0
        let latency = Percentiles(s.latenciesUs)
        let refresh = link.maximumFramesPerSecond
        if json {
            let latencyJSON = latency.map { "{\"p50\":\(Self.fixed($0.p50, 1)),\"p99\":\(Self.fixed($0.p99, 1)),\"max\":\(Self.fixed($0.max, 1))}" } ?? "null"
            Output.line("{\"summary\":true,\"ticks\":\(s.ticks),\"skipped\":\(s.skipped),\"achievedHz\":\(Self.fixed(achieved, 4)),"
                + "\"requested\":\"\(requested)\",\"maximumFramesPerSecond\":\(refresh),\"durationNs\":\(s.durationNs),"
                + "\"seconds\":\(Self.fixed(span, 3)),\"synthetic\":\(s.synthetic),\"latencyUs\":\(latencyJSON)}")
        } else {
            Output.line("summary: \(s.ticks) ticks over \(Self.fixed(span, 3)) s, achieved \(Self.fixed(achieved, 3)) Hz"
                + " (requested \(requested), display \(refresh) Hz\(s.synthetic ? ", synthetic" : "")), skipped \(s.skipped)")
            if let latency {
                Output.line("latency µs: p50 \(Self.fixed(latency.p50, 0))  p99 \(Self.fixed(latency.p99, 0))  max \(Self.fixed(latency.max, 0))")
            }
        }
    }
}

/// A value behind a lock. `@unchecked Sendable` is sound: `value` is only touched inside
/// `withLock`, which holds the lock for the whole access.
final class LockedState<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value
    init(_ value: Value) { self.value = value }
    func withLock<R>(_ body: (inout Value) -> R) -> R {
        lock.lock()
        defer { lock.unlock() }
        return body(&value)
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
