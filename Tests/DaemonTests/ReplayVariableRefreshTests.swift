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
        /// When vsyncd sent each of `messages` (CLOCK_MONOTONIC; `RawClient.lastSentNs`).
        var sentNs: [UInt64?] = []
        var log: String
        /// What a version 4 client following the same display got, when asked for.
        var version4: [ServerMessage] = []
        func ticks(_ id: UInt32) -> [Tick] { messages.compactMap { if case .tick(let t) = $0, t.subscriptionID == id { t } else { nil } } }
        var events: [DisplayEvent] { messages.compactMap { if case .displayEvent(let e) = $0 { e } else { nil } } }
    }

    /// Replays `name` to subscription 1 (full rate, no work duration) and, with `workDurationNs`,
    /// subscription 2 paced by it, until subscription 1 has the trace's last vblank.
    static func replayVariable(_ name: String, speed: Int, workDurationNs: UInt64 = 0, alsoVersion4: Bool = false) throws -> VariableRun {
        let (path, trace, stamps, last) = try load(name)
        let daemon = try DaemonProcess(extra: ["--source", "replay:\(path)@\(speed)"])
        let client = try RawClient(path: daemon.socketPath)
        let welcome = try client.handshake(name: "replay-vrr", version: 5)
        #expect(welcome.version == 5)
        // Version 5 sends the timing page right after WELCOME.
        _ = client.messages(timeout: 2) { if case .timingPage = $0 { true } else { false } }
        var messages: [ServerMessage] = [.subscribed(try client.subscribe(1, fps: 0))]
        var sentNs: [UInt64?] = [client.lastSentNs]
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
                sentNs.append(client.lastSentNs)
                if case .tick(let t) = m, t.subscriptionID == 1 { newest = t.sequence }
            case .timeout: continue
            case .closed, .undecodable: break
            }
        }
        #expect(newest == last, "the replay never reached the trace's last vblank: \(daemon.log)")
        while let old, case .message(let m) = old.receive(timeout: 0.2) { version4.append(m) }
        return VariableRun(trace: trace, stamps: stamps, messages: messages, sentNs: sentNs, log: daemon.log, version4: version4)
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

    /// Paced frames (subscription 2, one per real vblank under VRR) that were passed over while
    /// vsyncd was on time. Frame s is woken for at W before the earliest vblank s can be, the
    /// vblank before it plus the shortest interval. vsyncd passes it over only if vblank s came
    /// first: it is then already shown. That needs vsyncd to have been late, reading vblank s − 1
    /// only after frame s's wake was due (the two then come in one read), or the client's socket
    /// full (the frame's tick replaced while waiting, and subscription 1's ticks with it). On a
    /// loaded machine both happen, whatever vsyncd does; a frame passed over otherwise is its fault.
    static func framesPassedOverOnTime(_ r: VariableRun, workDurationNs: UInt64) -> [String] {
        var sent: [UInt64: (timestampNs: UInt64, sentNs: UInt64?)] = [:]
        for (m, x) in zip(r.messages, r.sentNs) {
            if case .tick(let t) = m, t.subscriptionID == 1 { sent[t.sequence] = (t.timestampNs, x) }
        }
        var onTime: [String] = []
        for t in r.ticks(2) where t.skipped > 0 {
            for s in (t.targetSequence - UInt64(t.skipped))..<t.targetSequence {
                guard let before = sent[s - 1], sent[s] != nil else { continue }  // the socket was full
                let wake = before.timestampNs + vrrShortestNs - workDurationNs
                if let x = before.sentNs, x >= wake { continue }
                onTime.append("frame \(s): vblank \(s - 1) sent \(before.sentNs.map { (Double($0) - Double(wake)) / 1e6 } ?? .nan) ms after its wake")
            }
        }
        return onTime
    }

    @Test("a stuttering game under VRR: every tick variable, targets the earliest next vblank, no mode-change storm")
    func gameStutter() throws {
        let w: UInt64 = 3_000_000
        let r = try Self.replayVariable("vrr-game-stutter.trace", speed: 1, workDurationNs: w)
        let ticks = r.ticks(1)
        let replay = Replay(trace: r.trace, stamps: r.stamps, ticks: ticks, others: [], log: r.log)
        Self.checkCommon(replay)
        // The trace plays from vsyncd's start, so how much of it a client gets depends on when
        // it subscribed; what vsyncd owes is every vblank after it answered.
        Self.checkFirstTick(replay, subscribedSentNs: r.sentNs[0])
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
        for t in paced {
            #expect(t.flags.contains(.variable))
            Self.checkEarliest(t)
            // One frame per real vblank, for the one after it: with no grid, frames the display
            // never had are neither aimed at nor counted as skipped.
            #expect(t.targetSequence == t.sequence + 1, "paced tick aimed \(t.targetSequence - t.sequence) ahead: \(paced.filter { $0.sequence + 3 >= t.sequence && $0.sequence <= t.sequence + 1 }.map { "\($0.sequence)→\($0.targetSequence) skipped \($0.skipped) ts \($0.timestampNs) target \($0.targetTimestampNs)" }), vblanks \((t.sequence - 1...t.sequence + 2).map { r.stamps[$0] ?? 0 })")
        }
        // Every frame from the first paced tick on is handed out or counted in skipped, one per
        // real vblank (so no frame is counted for a vblank that never was), over most of the run.
        for (a, b) in zip(paced, paced.dropFirst()) {
            #expect(b.targetSequence - a.targetSequence - 1 == UInt64(b.skipped), "paced \(a.targetSequence) → \(b.targetSequence), skipped \(b.skipped)")
        }
        let frames = paced.last.map { $0.targetSequence - paced[0].targetSequence + 1 } ?? 0
        #expect(frames >= 100, "paced frames: \(frames) (\(paced.count) ticks)")
        // Those passed over are the ones vsyncd was late for (on a quiet machine: none).
        let pacedSkipped = paced.dropFirst().reduce(0) { $0 + Int($1.skipped) }
        let onTime = Self.framesPassedOverOnTime(r, workDurationNs: w)
        #expect(onTime.isEmpty, "paced frames passed over while vsyncd was on time: \(onTime.prefix(5))")
        print("VRR game: \(ticks.count) ticks from vblank \(ticks.first?.sequence ?? 0), \(paced.count) paced, \(pacedSkipped) passed over, \(onTime.count) of them while vsyncd was on time")
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
        // Frames judged while on and while off, by sequence: a tick and those it counts as
        // skipped (a client late to read gets fewer ticks, each counting the ones it missed).
        var bumps = 0, onFrames = 0, offFrames = 0
        for m in r.messages {
            switch m {
            case .displayEvent(let e):
                variable = e.display.flags.contains(.variable)
                #expect(e.display.generation == generation &+ 1, "a toggle is one generation")
            case .tick(let t) where t.subscriptionID == 1:
                if t.generation != generation { bumps += 1; generation = t.generation }
                #expect(t.flags.contains(.variable) == variable, "tick \(t.sequence): variable \(t.flags.contains(.variable)), VRR \(variable)")
                if variable {
                    onFrames += 1 + Int(t.skipped)
                    Self.checkEarliest(t, shortestNs: Self.vrrShortestAt2Ns)
                } else {
                    offFrames += 1 + Int(t.skipped)
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
        #expect(old.allSatisfy { !$0.flags.contains(.variable) })
        // This client is read only between the other's reads: it is often full, and the ticks
        // it missed are counted, across the toggles too.
        for (a, b) in zip(old, old.dropFirst()) {
            #expect(b.sequence > a.sequence && b.sequence - a.sequence - 1 == UInt64(b.skipped), "version 4: \(a.sequence) → \(b.sequence), skipped \(b.skipped)")
        }
        let oldFrames = old.last.map { $0.sequence - old[0].sequence + 1 } ?? 0
        #expect(oldFrames >= 300, "a version 4 client's ticks span \(oldFrames) vblanks")
        #expect(Set(old.map(\.generation)).count == 5, "generations a version 4 client saw: \(Set(old.map(\.generation)))")
        #expect(onFrames >= 100 && offFrames >= 300, "frames on \(onFrames), off \(offFrames)")
    }
}
