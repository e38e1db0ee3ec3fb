import Foundation
import Testing
import VsyncCore

/// The trace corpus (Tests/Traces) replayed through the real vsyncd
/// (`--source replay:FILE@SPEED`) to a raw-protocol client subscribed at the full rate. Each
/// trace's header says where it came from and which are synthetic.
@Suite("Replayed traces through vsyncd", .serialized)
struct ReplayTraceTests {
    static let traces = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Traces")

    struct Replay {
        var trace: VBlankTrace
        /// Trace timestamp of each vblank, by sequence.
        var stamps: [UInt64: UInt64]
        var ticks: [Tick]
        var others: [ServerMessage]
        var log: String
        var speed: ReplaySpeed = .one

        /// Where vsyncd puts the trace's vblank `sequence` on CLOCK_MONOTONIC: the trace's
        /// timeline from its first event after the opening mode lines, compressed SPEED times,
        /// starting where the first tick puts it.
        func timestamp(of sequence: UInt64) -> UInt64? {
            let settings = trace.events.prefix {
                switch $0 { case .vblank, .off: false; default: true }
            }
            let start = trace.events.dropFirst(settings.count).first?.timeNs ?? 0
            guard let first = stamps[ticks[0].sequence], let stamp = stamps[sequence] else { return nil }
            let origin = ticks[0].timestampNs - speed.compress(first - start)
            return origin + speed.compress(stamp - start)
        }
    }

    /// The trace `name` in Tests/Traces: its path, its events, its vblanks' stamps by sequence
    /// and its last sequence.
    static func load(_ name: String) throws -> (path: String, trace: VBlankTrace, stamps: [UInt64: UInt64], last: UInt64) {
        let path = traces.appendingPathComponent(name).path
        let trace = try VBlankTrace(parsing: String(contentsOfFile: path, encoding: .utf8))
        var stamps: [UInt64: UInt64] = [:]
        var last: UInt64 = 0
        for case let .vblank(_, s, t) in trace.events { stamps[s] = t; last = max(last, s) }
        return (path, trace, stamps, last)
    }

    /// Replays `name` `speed` times as fast as recorded until the client has the trace's last vblank.
    static func replay(_ name: String, speed: Int = 2) throws -> Replay {
        let (path, trace, stamps, last) = try load(name)
        let daemon = try DaemonProcess(extra: ["--source", "replay:\(path)@\(speed)"])
        let client = try RawClient(path: daemon.socketPath)
        try client.handshake(name: "replay")
        _ = try client.subscribe(1, fps: 0)
        var ticks: [Tick] = [], others: [ServerMessage] = []
        // The traces last ≤ 10 s replayed: 20 s is only a backstop.
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline, ticks.last?.sequence != last {
            switch client.receive(timeout: 1) {
            case .message(.tick(let t)): ticks.append(t)
            case .message(let m): others.append(m)
            case .timeout: continue
            case .closed, .undecodable: break
            }
        }
        #expect(ticks.last?.sequence == last, "the replay never reached the trace's last vblank: \(daemon.log)")
        #expect(ticks.count >= 50, "too few ticks: \(daemon.log)")
        return Replay(trace: trace, stamps: stamps, ticks: ticks, others: others, log: daemon.log,
                      speed: ReplaySpeed(numerator: UInt64(speed), denominator: 1))
    }

    /// What holds for every trace: ticks are the trace's vblanks (its sequences, its timeline
    /// compressed SPEED times onto the daemon's clock), flagged synthetic, and every vblank
    /// between two ticks that the client did not get is counted in `skipped`.
    static func checkCommon(_ r: Replay) {
        for t in r.ticks {
            #expect(t.flags.contains(.synthetic) && !t.flags.contains(.hardwareTimestamp))
            #expect(r.timestamp(of: t.sequence) == t.timestampNs, "tick \(t.sequence) is not the trace's vblank")
        }
        for (a, b) in zip(r.ticks, r.ticks.dropFirst()) {
            #expect(b.sequence > a.sequence && b.sequence - a.sequence - 1 == UInt64(b.skipped), "\(a.sequence) → \(b.sequence), skipped \(b.skipped)")
        }
    }

    /// The first tick is the first vblank after vsyncd answered SUBSCRIBED (it turns the
    /// display's events on before it answers): the vblank before it was replayed before then.
    /// `subscribedSentNs`: when vsyncd sent SUBSCRIBED (`RawClient.lastSentNs`).
    static func checkFirstTick(_ r: Replay, subscribedSentNs: UInt64?) {
        guard let first = r.ticks.first, let answered = subscribedSentNs else {
            Issue.record("no tick, or no send time for SUBSCRIBED")
            return
        }
        // The trace's first vblank has none before it.
        guard let before = r.timestamp(of: first.sequence - 1) else { return }
        // The clock pair that puts the kernel's send stamp on CLOCK_MONOTONIC is good to a few µs.
        #expect(before < answered + 100_000, "vblank \(first.sequence - 1) came \(Double(Int64(before) - Int64(answered)) / 1e6) ms after SUBSCRIBED and was not ticked")
    }

    /// |target − (timestamp + period)| for each tick, ns.
    static func targetErrors(_ ticks: ArraySlice<Tick>, periodNs: Double) -> [Double] {
        ticks.map { abs(Double($0.targetTimestampNs) - Double($0.timestampNs) - periodNs * Double($0.targetSequence - $0.sequence)) }
    }

    static let period60 = 1e9 * 1302 / 78125  // the recorded mode: 65 MHz over 1344 × 806, replayed at 2×: half

    @Test("vkms recording: the ticks are the kernel's vblanks, targets on its exact grid")
    func vkms() throws {
        let r = try Self.replay("vkms-60hz.trace")
        Self.checkCommon(r)
        #expect(r.ticks.allSatisfy { $0.displayIntervalNs == 16_665_600 / 2 })
        // Once the fit has 6 samples, the next vblank is predicted to the ns.
        #expect(Self.targetErrors(r.ticks.dropFirst(6), periodNs: Self.period60 / 2).allSatisfy { $0 <= 2 })
    }

    @Test("interrupt-stamped recording: targets are the earliest the next stamp can come")
    func interruptStamps() throws {
        let r = try Self.replay("vkms-interrupt-stamps.trace")
        Self.checkCommon(r)
        // The next stamp comes late by 0-4 ms (the host tick): once the model has seen the
        // spread (a full window), the target is the envelope, never after the real stamp
        // by more than the envelope's own error, and never 4 ms before it.
        var late = 0, judged = 0
        for (t, next) in zip(r.ticks.dropFirst(150), r.ticks.dropFirst(151)) where next.sequence == t.targetSequence {
            let lead = Double(next.timestampNs) - Double(t.targetTimestampNs)
            judged += 1
            if lead < -100_000 { late += 1 }
            #expect(lead > -1_000_000 && lead < 4_500_000, "target \(lead) ns before the stamp of \(next.sequence)")
        }
        #expect(judged >= 100)
        #expect(late * 20 <= judged, "\(late) of \(judged) targets after their vblank's stamp")
    }

    @Test("missed vblanks: each counted in skipped, the fit unaffected")
    func missed() throws {
        let r = try Self.replay("missed-vblanks.trace")
        Self.checkCommon(r)
        let span = r.ticks.first!.sequence...r.ticks.last!.sequence
        let missing = span.filter { r.stamps[$0] == nil }
        #expect(missing.count >= 5, "the trace's gaps are not in the replayed span")
        let skipped = r.ticks.dropFirst().reduce(0) { $0 + Int($1.skipped) }
        #expect(skipped >= missing.count)
        #expect(Self.targetErrors(r.ticks.dropFirst(6), periodNs: Self.period60 / 2).allSatisfy { $0 <= 2 })
    }

    @Test("suspend gap: the phase restarts after the jump, no mode change")
    func suspendGap() throws {
        let r = try Self.replay("suspend-gap.trace", speed: 10)  // 35 s of trace in 3.5 s
        Self.checkCommon(r)
        // The trace's 30 s jump is 3 s at 10×.
        let jump = try #require(r.ticks.indices.dropLast().first { r.ticks[$0 + 1].timestampNs - r.ticks[$0].timestampNs > 2_900_000_000 })
        // Right after the jump the model restarts the phase and keeps the period, so the
        // next vblank is exact again from the first tick after it.
        #expect(Self.targetErrors(r.ticks[(jump + 1)...], periodNs: Self.period60 / 10).allSatisfy { $0 <= 2 })
        #expect(!r.others.contains { if case .displayEvent = $0 { true } else { false } }, "\(r.others)")
    }

    @Test("mode change: one modeChanged, then ticks on the new grid")
    func modeChange() throws {
        let r = try Self.replay("mode-change.trace")
        Self.checkCommon(r)
        let events = r.others.compactMap { if case .displayEvent(let e) = $0 { e } else { nil } }
        #expect(events.map(\.kind) == [.modeChanged], "\(events)")
        let period75 = 1e9 * 119_288 / 8_946_625 / 2  // replayed at 2×
        let after = r.ticks.filter { $0.displayIntervalNs == UInt64(period75.rounded()) }
        // Counted by sequence: a client late to read gets fewer ticks, each counting the rest.
        let span = after.last.map { $0.sequence - after[0].sequence + 1 } ?? 0
        #expect(span >= 100, "ticks at 75 Hz span \(span) vblanks (\(after.count) ticks)")
        #expect(Self.targetErrors(after.dropFirst(6)[...], periodNs: period75).allSatisfy { $0 <= 2 })
    }
}
