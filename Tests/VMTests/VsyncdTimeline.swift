import Foundation
import VsyncCore

/// The kernel's vblanks, from its own record (KernelRecord): vkms timestamps come from an hrtimer
/// and are exactly periodic, so each mode is a run of vblanks on one arithmetic progression. A
/// mode change or the CRTC going off breaks the progression and starts a new segment.
struct VBlankSegment {
    var samples: [(sequence: UInt64, timestampNs: UInt64)]
    var fit: LinearFit
    var firstSequence: UInt64 { samples.first!.sequence }
    var lastSequence: UInt64 { samples.last!.sequence }
    var firstNs: UInt64 { samples.first!.timestampNs }
    var lastNs: UInt64 { samples.last!.timestampNs }
    var periodNs: Double { fit.periodNs }
    var maxResidualNs: Double { fit.residualsNs.map(abs).max() ?? 0 }
}

struct VBlankTruth {
    /// Every vblank the kernel recorded: sequence → its timestamp.
    var timestamps: [UInt64: UInt64] = [:]
    var segments: [VBlankSegment] = []
    /// Client ticks whose timestamp is not the kernel's for their sequence (must never happen).
    var conflicts: [String] = []

    /// The progression from the kernel's own record (KernelRecord), independent of vsyncd;
    /// `conflicts` lists every client tick whose timestamp is not the kernel's for its sequence.
    init(kernel: KernelRecord, clients: [[FollowTick]]) {
        timestamps = kernel.timestamps
        for tick in clients.joined() {
            if let real = kernel.timestamps[tick.seq], real != tick.timestampNs {
                conflicts.append("seq \(tick.seq): vsyncd said \(tick.timestampNs), the kernel \(real)")
            }
        }
        segmentize(kernel.ordered)
    }

    /// Splits `samples` (in the order recorded) into arithmetic progressions, one per mode.
    private mutating func segmentize(_ samples: [(sequence: UInt64, timestampNs: UInt64)]) {
        var current: [(sequence: UInt64, timestampNs: UInt64)] = []
        var period: Double?
        func close() {
            if current.count >= 8, let fit = RefreshModel.fit(current) {
                segments.append(VBlankSegment(samples: current, fit: fit))
            }
            current = []
            period = nil
        }
        for sample in samples {
            if let last = current.last, sample.sequence <= last.sequence { close() }  // a count restarted
            if let last = current.last {
                let gap = Double(sample.sequence - last.sequence)
                let dt = Double(sample.timestampNs) - Double(last.timestampNs)
                if let p = period, abs(dt - gap * p) > 2_000 {
                    close()
                } else if period == nil {
                    period = dt / gap
                }
            }
            current.append(sample)
        }
        close()
    }

    func segment(containing ns: UInt64) -> VBlankSegment? {
        segments.first { $0.firstNs <= ns && ns <= $0.lastNs }
    }
}

/// What one client saw in one window, checked against the kernel's progression.
struct ClientWindowReport {
    var name: String
    var divisor: UInt64
    var ticks = 0
    var skipped = 0
    var deliveredHz = 0.0
    var sequenceHz = 0.0
    var targetErrorsUs: [Double] = []
    var latenciesUs: [Double] = []
    var failures: [String] = []
    /// The first tick that carried the next mode's duration before that mode's first vblank.
    var nextModeFromSequence: UInt64?

    var summary: String {
        let target = Percentiles(targetErrorsUs)
        let latency = Percentiles(latenciesUs)
        return "\(name): divisor \(divisor), \(ticks) ticks, skipped \(skipped), delivered \(String(format: "%.3f", deliveredHz)) Hz"
            + ", targetTimestamp error µs p50/p99/max \(target.map { "\(us($0.p50))/\(us($0.p99))/\(us($0.max))" } ?? "-") (n=\(targetErrorsUs.count))"
            + ", latency µs p50/p99/max \(latency.map { "\(us($0.p50))/\(us($0.p99))/\(us($0.max))" } ?? "-")"
            + (nextModeFromSequence.map { ", the next mode's duration from seq \($0)" } ?? "")
    }
}

enum TickCheck {
    /// The bounds vsyncd promises clients: timestamps equal the kernel's (on its progression within 1 µs),
    /// targetTimestamp within 50 µs of the real next vblank at the client's rate.
    static let progressionToleranceNs = 1_000.0
    static let targetToleranceNs = 50_000.0
    /// The daemon's duration is its model's period; vkms periods are whole ns.
    static let durationToleranceNs = 100.0
    /// How long after a mode set's first vblank (and before it, while the new mode may already be
    /// readable) ticks are not held to one mode: Linux 7.3 relights a CRTC within 20 ms, and the
    /// daemon's off, re-read, on and first vblank then spread over up to 12 frames at 144 Hz
    /// under TCG (measured; 83 ms).
    static let modeSetRecoveryNs: UInt64 = 120_000_000

    /// Checks `ticks` whose timestamps fall in `from...to` against `segment` (the mode in force)
    /// for a client at `divisor`: sequences, gaps (each accounted for by `skipped`), timestamps,
    /// duration, targetTimestamp, flags and rate. `nextPeriodNs`: the period of the mode set next,
    /// which the kernel reports from the moment the commit swaps its state in, before the old
    /// mode's last vblank (under TCG, up to 0.6 s before): from the first tick that carries it,
    /// vsyncd read the new mode, and the old one coming back would be the failure. Its targets
    /// and rate then follow the mode the kernel reported, not the vblanks still on the old grid:
    /// they are judged up to that tick.
    static func check(
        _ name: String, _ ticks: [FollowTick], divisor: UInt64, segment: VBlankSegment, truth: VBlankTruth,
        from: UInt64, to: UInt64, minimumTicks: Int = 10, nextPeriodNs: Double? = nil, nextDivisor: UInt64? = nil
    ) -> ClientWindowReport {
        var report = ClientWindowReport(name: name, divisor: divisor)
        let window = ticks.filter { $0.timestampNs >= from && $0.timestampNs <= to }
        report.ticks = window.count
        func fail(_ text: String) { if report.failures.count < 12 { report.failures.append("\(name): \(text)") } }
        guard window.count >= minimumTicks else {
            fail("only \(window.count) ticks in the window (want \(minimumTicks))")
            return report
        }
        var period = segment.periodNs
        let judgedDivisor = divisor
        var divisor = divisor
        var previous: FollowTick?
        var judged: [FollowTick] = []
        for tick in window {
            // The new mode's first tick comes at its own divisor, whatever the gap since the old one.
            var switched = false
            if let next = nextPeriodNs, period != next, abs(Double(tick.durationNs) - next) <= durationToleranceNs {
                report.nextModeFromSequence = tick.seq
                period = next
                divisor = nextDivisor ?? divisor
                switched = true
            }
            if tick.seq % divisor != 0 { fail("seq \(tick.seq) is not a multiple of divisor \(divisor)") }
            if let p = previous {
                if tick.seq <= p.seq {
                    fail("seq \(tick.seq) after \(p.seq): not increasing (duplicate or stale tick)")
                } else if !switched, tick.seq - p.seq != divisor * UInt64(1 + tick.skipped) {
                    fail("seq \(p.seq) → \(tick.seq) with skipped \(tick.skipped) at divisor \(divisor): unaccounted gap")
                }
                report.skipped += tick.skipped
            }
            let onProgression = Double(tick.timestampNs) - Double(segment.fit.predictedTimestamp(forSequence: tick.seq))
            if abs(onProgression) > progressionToleranceNs {
                fail("seq \(tick.seq) timestamp \(tick.timestampNs) is \(Int(onProgression)) ns off the kernel's progression")
            }
            if let real = truth.timestamps[tick.seq], real != tick.timestampNs {
                fail("seq \(tick.seq) timestamp \(tick.timestampNs) differs from the truth's \(real) (the kernel's record, or another client)")
            }
            if abs(Double(tick.durationNs) - period) > durationToleranceNs {
                fail("seq \(tick.seq) duration \(tick.durationNs) ns, the display's period is \(String(format: "%.1f", period)) ns")
            }
            // A target made before a mode change cannot know it: only vblanks of the same mode count.
            if report.nextModeFromSequence == nil, tick.seq + divisor <= segment.lastSequence, let next = truth.timestamps[tick.seq + divisor] {
                let error = Double(tick.targetTimestampNs) - Double(next)
                report.targetErrorsUs.append(abs(error) / 1000)
                if abs(error) > targetToleranceNs {
                    fail("seq \(tick.seq) targetTimestamp \(tick.targetTimestampNs) is \(Int(error)) ns from vblank \(tick.seq + divisor) at \(next)")
                }
            }
            if tick.flags != ["hardware"] { fail("seq \(tick.seq) flags \(tick.flags), want [hardware]") }
            report.latenciesUs.append(tick.latencyUs)
            if report.nextModeFromSequence == nil { judged.append(tick) }
            previous = tick
        }
        guard let first = judged.first, let last = judged.last, last.seq > first.seq else { return report }
        let span = Double(last.timestampNs - first.timestampNs) / 1e9
        let wantHz = 1e9 / segment.periodNs / Double(judgedDivisor)
        report.deliveredHz = Double(judged.count - 1) / span
        report.sequenceHz = Double(last.seq - first.seq) / Double(judgedDivisor) / span
        if abs(report.sequenceHz - wantHz) / wantHz > 10e-6 {
            fail("rate by sequence \(report.sequenceHz) Hz, want \(wantHz) Hz")
        }
        // Not asserted: the share of due ticks delivered. A TCG guest misses whole frames when the
        // host is busy (from 0 % at 60 Hz on a quiet host to a third of them at 144 Hz on a loaded
        // one), whatever the daemon does; each miss must be accounted for by `skipped` above, and
        // `minimumTicks` catches a client starved outright. The figure is printed.
        return report
    }

    /// A spell in which the kernel had vblanks for a client that it did not get.
    struct UntickedSpell: CustomStringConvertible {
        /// How much of it is the client's and the daemon's: the frames the kernel gave that the
        /// client did not get, less `guestHeldNs`.
        var ns: UInt64 = 0
        /// From the first unticked vblank to the client's next tick.
        var totalNs: UInt64 = 0
        /// The frames in it the kernel gave (a vblank event each): `totalNs` less the kernel's
        /// own pauses (its vblank timer late, its count jumping over the periods that passed).
        var framesNs: UInt64 = 0
        /// How long the guest kept even the recorder from reading vblanks then
        /// (`KernelRecord.readerHeldUpNs`): the guest's, not the daemon's.
        var guestHeldNs: UInt64 = 0
        var vblanks = 0
        var startNs: UInt64 = 0
        var description: String {
            String(format: "%.1f ms (%.1f ms without a tick, %.1f ms of it frames the kernel gave, %.1f ms the guest holding up every reader; %d vblanks)",
                   Double(ns) / 1e6, Double(totalNs) / 1e6, Double(framesNs) / 1e6, Double(guestHeldNs) / 1e6, vblanks)
        }
    }

    /// The longest spell within `from...to` in which a client got no tick while the kernel gave
    /// vblanks for it, counted as what the daemon and the client own. A spell runs from a vblank
    /// the kernel recorded that no tick named to the client's next tick; one still open at `to`
    /// lasts as far as the record shows unticked vblanks (the end of a run is when the guest is
    /// busiest, and the record and the client stop there at once). It counts the frames the
    /// kernel gave, one per recorded vblank (by sequence): a pause of the kernel's own (vkms's
    /// vblank timer late under TCG, the count jumping over the periods that passed, no event for
    /// them) is no time a tick was due. From that it takes the time the guest kept even the
    /// recorder from reading events: a stall of every process (TCG on a loaded host, the kernel's
    /// own work) is not the daemon's. Vblanks off a client's divisor count, so a spell is at
    /// least `divisor - 1` frames.
    static func longestUntickedSpell(_ ticks: [FollowTick], kernel: KernelRecord, from: UInt64, to: UInt64) -> UntickedSpell {
        let stamps = ticks.map(\.timestampNs).sorted()
        let ticked = Set(ticks.map(\.seq))
        let record = kernel.ordered.sorted { $0.timestampNs < $1.timestampNs }
        var worst = UntickedSpell(startNs: from)
        // The run in hand: its first vblank, its unticked vblanks' indices in `record`.
        var run: [Int] = []
        func close(at end: UInt64) {
            guard let first = run.first else { return }
            let start = record[first].timestampNs
            var frames: UInt64 = 0
            for i in run {
                // Each unticked vblank stands for one frame: to the next vblank, or to the spell's
                // end, at most one period (the kernel's, from its own count).
                let next = i + 1 < record.count ? record[i + 1] : nil
                let until = min(next?.timestampNs ?? end, end)
                let period = next.map { ($0.timestampNs - record[i].timestampNs) / max(1, $0.sequence - record[i].sequence) }
                    ?? (i > 0 ? (record[i].timestampNs - record[i - 1].timestampNs) / max(1, record[i].sequence - record[i - 1].sequence) : until - record[i].timestampNs)
                frames += min(until - record[i].timestampNs, period)
            }
            let held = min(kernel.readerHeldUpNs(from: start, to: end), frames)
            let spell = UntickedSpell(ns: frames - held, totalNs: end - start, framesNs: frames, guestHeldNs: held, vblanks: run.count, startNs: start)
            if spell.ns > worst.ns || (spell.ns == worst.ns && spell.totalNs > worst.totalNs) { worst = spell }
            run = []
        }
        var next = 0  // the first tick stamp at or after the vblank in hand
        for (index, vblank) in record.enumerated() where vblank.timestampNs <= to {
            while next < stamps.count && stamps[next] < vblank.timestampNs {
                // A tick between two recorded vblanks (one the record lacks) ends a spell too.
                if let first = run.first, stamps[next] >= record[first].timestampNs { close(at: stamps[next]) }
                next += 1
            }
            if ticked.contains(vblank.sequence) { close(at: vblank.timestampNs); continue }
            guard vblank.timestampNs >= from else { continue }
            run.append(index)
        }
        if let last = run.last { close(at: next < stamps.count && stamps[next] <= to ? stamps[next] : record[last].timestampNs) }
        return worst
    }

    /// Whether `kernel` holds vblanks in the first and the last quarter of `from...to`, so that a
    /// spell measured against it means something.
    static func record(_ kernel: KernelRecord, covers from: UInt64, _ to: UInt64) -> Bool {
        let quarter = (to - from) / 4
        return kernel.ordered.contains { $0.timestampNs >= from && $0.timestampNs <= from + quarter }
            && kernel.ordered.contains { $0.timestampNs >= to - quarter && $0.timestampNs <= to }
    }

    /// Sequences a client got twice or out of order anywhere in its run.
    static func notIncreasing(_ ticks: [FollowTick]) -> [String] {
        zip(ticks, ticks.dropFirst()).filter { $0.1.seq <= $0.0.seq }
            .map { "seq \($0.1.seq) (timestamp \($0.1.timestampNs)) after seq \($0.0.seq)" }
    }
}
