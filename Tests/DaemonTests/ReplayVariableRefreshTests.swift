import Foundation
import Testing
import VsyncCore

// The synthetic VRR traces (Tests/Traces/vrr-*.trace, made by make-vrr-traces.py) replayed to a
// protocol 5 client: what variable refresh must do, shown on recorded-shape input.
extension ReplayTraceTests {
    /// 1 / 144 Hz, as the daemon rounds the EDID range's maximum (48-144 Hz).
    static let vrrShortestNs: UInt64 = 6_944_444
    static let vrrLongestNs: UInt64 = 20_833_333
    /// Replayed at 2×, the display is a 96-288 Hz one: 1 / 288 Hz.
    static let vrrShortestAt2Ns: UInt64 = 3_472_222

    struct VariableRun {
        var trace: VBlankTrace
        var stamps: [UInt64: UInt64]
        /// Everything the client got after WELCOME and its SUBSCRIBEDs, in order.
        var messages: [ServerMessage]
        var log: String
        /// What a version 4 client following the same display got, when asked for.
        var version4: [ServerMessage] = []
        func ticks(_ id: UInt32) -> [Tick] { messages.compactMap { if case .tick(let t) = $0, t.subscriptionID == id { t } else { nil } } }
        var events: [DisplayEvent] { messages.compactMap { if case .displayEvent(let e) = $0 { e } else { nil } } }
    }

    /// Replays `name` to subscription 1 (full rate, no work duration) and, with `workDurationNs`,
    /// subscription 2 paced by it, until subscription 1 has the trace's last vblank.
    static func replayVariable(_ name: String, speed: Int, workDurationNs: UInt64 = 0, alsoVersion4: Bool = false) throws -> VariableRun {
        let path = traces.appendingPathComponent(name).path
        let trace = try VBlankTrace(parsing: String(contentsOfFile: path, encoding: .utf8))
        var stamps: [UInt64: UInt64] = [:]
        var last: UInt64 = 0
        for case let .vblank(_, s, t) in trace.events { stamps[s] = t; last = max(last, s) }
        let daemon = try DaemonProcess(extra: ["--source", "replay:\(path)@\(speed)"])
        let client = try RawClient(path: daemon.socketPath)
        let welcome = try client.handshake(name: "replay-vrr", version: 5)
        #expect(welcome.version == 5)
        // Version 5 sends the timing page right after WELCOME.
        _ = client.messages(timeout: 2) { if case .timingPage = $0 { true } else { false } }
        var messages: [ServerMessage] = [.subscribed(try client.subscribe(1, fps: 0))]
        if workDurationNs > 0 {
            client.send(.subscribe(Subscribe(subscriptionID: 2, selector: .primary, range: FrameRateRange(preferredFramesPerSecond: 0),
                                             workDurationNs: workDurationNs)))
        }
        var old: RawClient?
        if alsoVersion4 {
            old = try RawClient(path: daemon.socketPath)
            try old?.handshake(name: "replay-v4", version: 4)
            _ = try old?.subscribe(1, fps: 0)
        }
        var version4: [ServerMessage] = []
        let deadline = Date().addingTimeInterval(30)
        var newest: UInt64 = 0
        while Date() < deadline, newest != last {
            while let old, case .message(let m) = old.receive(timeout: 0) { version4.append(m) }
            switch client.receive(timeout: 1) {
            case .message(let m):
                messages.append(m)
                if case .tick(let t) = m, t.subscriptionID == 1 { newest = t.sequence }
            case .timeout: continue
            case .closed, .undecodable: break
            }
        }
        #expect(newest == last, "the replay never reached the trace's last vblank: \(daemon.log)")
        while let old, case .message(let m) = old.receive(timeout: 0.2) { version4.append(m) }
        return VariableRun(trace: trace, stamps: stamps, messages: messages, log: daemon.log, version4: version4)
    }

    /// A variable tick's target and timelines are the earliest the vblanks can be: the newest
    /// vblank plus k shortest intervals, never sooner.
    static func checkEarliest(_ t: Tick, shortestNs: UInt64 = vrrShortestNs) {
        #expect(t.displayIntervalNs == shortestNs)
        #expect(t.targetTimestampNs >= t.timestampNs + shortestNs, "target \(t.targetTimestampNs) before last \(t.timestampNs) + shortest")
        for line in t.timelines {
            #expect(line.presentationNs == t.timestampNs + (line.sequence - t.sequence) * shortestNs, "\(t)")
        }
    }

    @Test("a stuttering game under VRR: every tick variable, targets the earliest next vblank, no mode-change storm")
    func gameStutter() throws {
        let r = try Self.replayVariable("vrr-game-stutter.trace", speed: 1, workDurationNs: 3_000_000)
        let ticks = r.ticks(1)
        Self.checkCommon(Replay(trace: r.trace, stamps: r.stamps, ticks: ticks, others: [], log: r.log))
        #expect(ticks.count >= 400)
        // VRR on from the start: nothing changes, so no event and one generation throughout,
        // though the intervals vary from 6.9 to 20.8 ms (the model would have restarted on them).
        #expect(r.events.isEmpty, "\(r.events)")
        #expect(Set(ticks.map(\.generation)).count == 1, "generations \(Set(ticks.map(\.generation)))")
        guard case .subscribed(let s) = r.messages[0] else { Issue.record("no SUBSCRIBED"); return }
        #expect(s.display.flags.isSuperset(of: [.variable, .variableCapable]))
        #expect(s.display.minIntervalNs == Self.vrrShortestNs && s.display.maxIntervalNs == Self.vrrLongestNs)
        #expect(s.displayIntervalNs == Self.vrrShortestNs && s.display.periodNs == Self.vrrShortestNs)
        for t in ticks {
            #expect(t.flags.contains(.variable), "tick \(t.sequence) not flagged variable")
            Self.checkEarliest(t)
        }
        // The paced subscription wakes for the earliest next vblank too.
        let paced = r.ticks(2)
        #expect(paced.count >= 100, "paced ticks: \(paced.count)")
        for t in paced {
            #expect(t.flags.contains(.variable))
            Self.checkEarliest(t)
            // One frame per real vblank, for the one after it: with no grid, frames the display
            // never had are neither aimed at nor counted as skipped.
            #expect(t.targetSequence == t.sequence + 1, "paced tick aimed \(t.targetSequence - t.sequence) ahead: \(paced.filter { $0.sequence + 3 >= t.sequence && $0.sequence <= t.sequence + 1 }.map { "\($0.sequence)→\($0.targetSequence) skipped \($0.skipped) ts \($0.timestampNs) target \($0.targetTimestampNs)" }), vblanks \((t.sequence - 1...t.sequence + 2).map { r.stamps[$0] ?? 0 })")
        }
        let pacedSkipped = paced.reduce(0) { $0 + Int($1.skipped) }
        #expect(pacedSkipped <= 3, "paced ticks skipped \(pacedSkipped) frames")
        #expect(!r.log.contains("mode changed"), "\(r.log)")
    }

    @Test("VRR on and off mid-stream: one event and one generation per toggle, ticks flagged exactly while on")
    func toggle() throws {
        let r = try Self.replayVariable("vrr-toggle.trace", speed: 2, alsoVersion4: true)
        let ticks = r.ticks(1)
        Self.checkCommon(Replay(trace: r.trace, stamps: r.stamps, ticks: ticks, others: [], log: r.log, speed: ReplaySpeed(numerator: 2, denominator: 1)))
        let events = r.events
        #expect(events.map(\.kind) == Array(repeating: .variableRefreshChanged, count: 4), "\(events.map(\.kind))")
        #expect(events.map { $0.display.flags.contains(.variable) } == [true, false, true, false])
        // Each event's record carries the clock pair it was built with (protocol 5).
        for e in events {
            let clock = try #require(e.display.clock)
            #expect(clock.monotonicNs > 0 && clock.realtimeNs > clock.monotonicNs)
        }
        var variable = false
        var generation = ticks.first?.generation ?? 0
        var bumps = 0, onTicks = 0, offTicks = 0
        for m in r.messages {
            switch m {
            case .displayEvent(let e):
                variable = e.display.flags.contains(.variable)
                #expect(e.display.generation == generation &+ 1, "a toggle is one generation")
            case .tick(let t) where t.subscriptionID == 1:
                if t.generation != generation { bumps += 1; generation = t.generation }
                #expect(t.flags.contains(.variable) == variable, "tick \(t.sequence): variable \(t.flags.contains(.variable)), VRR \(variable)")
                if variable {
                    onTicks += 1
                    Self.checkEarliest(t, shortestNs: Self.vrrShortestAt2Ns)
                } else {
                    offTicks += 1
                    // 288 Hz replayed either way: off VRR it is the model's estimate, within a ns or two.
                    #expect(t.displayIntervalNs >= Self.vrrShortestAt2Ns - 2 && t.displayIntervalNs <= Self.vrrShortestAt2Ns + 2)
                }
            default: continue
            }
        }
        #expect(bumps == 4, "generation bumps: \(bumps)")
        // A version 4 client gets no kind 6 (its reader would refuse it) and no variable flag:
        // it sees each toggle as one new generation.
        let old = r.version4.compactMap { if case .tick(let t) = $0 { t } else { nil } }
        #expect(!r.version4.contains { if case .displayEvent = $0 { true } else { false } }, "\(r.version4.filter { if case .tick = $0 { false } else { true } })")
        #expect(old.count >= 300 && old.allSatisfy { !$0.flags.contains(.variable) })
        #expect(Set(old.map(\.generation)).count == 5, "generations a version 4 client saw: \(Set(old.map(\.generation)))")
        #expect(onTicks >= 100 && offTicks >= 300, "on \(onTicks), off \(offTicks)")
    }
}
