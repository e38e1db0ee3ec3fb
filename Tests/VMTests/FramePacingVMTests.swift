import Foundation
import Testing
import VsyncCore

/// Frame pacing, predicted ticks while off, and a display lit after vsyncd started, on vkms in the
/// VM test bed. The truth is the kernel's own record of every vblank, taken beside
/// vsyncd by Tests/vm-tools/kernel-vblank-recorder.c (drmCrtcQueueSequence), matched by sequence.
@Suite(.serialized)
struct FramePacingVMTests {
    /// `vsync-probe follow --json` tick lines, with the fields protocol 2 added.
    struct PacedTick: Decodable {
        struct Timeline: Decodable { var seq: UInt64; var presentationTimestamp: Double }
        var seq: UInt64
        var timestampNs: UInt64
        var targetTimestampNs: UInt64
        var targetSequence: UInt64
        var skipped: Int
        var flags: [String]
        var latencyUs: Double
        var leadUs: Double
        var workDurationUs: Double
        var timelines: [Timeline]
        /// Protocol 4's configuration generation (nil from an older vsync-probe).
        var generation: UInt32?
        /// Why the tick's frame was late, or "onTime" (nil from an older vsync-probe).
        var reason: String?
        var receivedNs: UInt64 { timestampNs &+ UInt64(max(0, latencyUs * 1000)) }
        var isPredicted: Bool { flags.contains("predicted") }
    }

    /// The release build: these tests measure leads and recovery in frames, and a debug build
    /// under TCG wakes so late that it measures the build (at 144 Hz, W 5 ms: lead p50 −0.9 ms
    /// debug, 3.8 ms release, in one pair of runs).
    /// And booted with the host's TSC rate: a lead is W less the wake-up's lateness, and on a
    /// busy host a guest left to calibrate its TSC falls back to the 250 Hz tick for every timer
    /// (wake-ups up to 4 ms late, lead p50 ~3 ms for W 5 ms): that is the guest kernel's, not
    /// the daemon's.
    static func script() throws -> VsyncdGuestScript {
        var script = try VsyncdGuestScript(release: true)
        script.hostTSC = true
        return script
    }

    static func ticks(_ out: VsyncdGuestOutput, _ name: String) -> [PacedTick] {
        out.all(name).filter { $0.hasPrefix("{\"seq\"") }.compactMap { try? JSONDecoder().decode(PacedTick.self, from: Data($0.utf8)) }
    }

    static func percentile(_ values: [Double], _ p: Double) -> Double {
        let sorted = values.sorted()
        return sorted.isEmpty ? .nan : sorted[min(sorted.count - 1, Int(Double(sorted.count - 1) * p + 0.5))]
    }

    /// How late the guest woke a process around `ns`: the recorder's read of the recorded vblank
    /// nearest it, less the vblank's time (nil where the record has none within 20 ms).
    static func guestLateness(_ kernel: KernelRecord, atNs ns: UInt64) -> Double? {
        let record = kernel.ordered  // in the order recorded: by time
        var low = 0, high = record.count
        while low < high { let mid = (low + high) / 2; if record[mid].timestampNs < ns { low = mid + 1 } else { high = mid } }
        let near = [low - 1, low].filter { record.indices.contains($0) }
            .map { record[$0] }.filter { ($0.timestampNs > ns ? $0.timestampNs - ns : ns - $0.timestampNs) <= 20_000_000 }
            .min { ($0.timestampNs > ns ? $0.timestampNs - ns : ns - $0.timestampNs) < ($1.timestampNs > ns ? $1.timestampNs - ns : ns - $1.timestampNs) }
        return near.flatMap { v in kernel.receivedNs[v.sequence].map { max(0, Double($0) - Double(v.timestampNs)) } }
    }

    /// Ticks whose target the kernel record has, and how far each target is from it.
    static func targetErrors(_ ticks: [PacedTick], _ kernel: KernelRecord) -> [(tick: PacedTick, errorNs: Int64)] {
        ticks.compactMap { t in
            kernel.timestamps[t.targetSequence].map { (t, Int64(bitPattern: t.targetTimestampNs &- $0)) }
        }
    }

    // MARK: Work duration at 60 and 144 Hz, across a mode change

    @Test func targetsAreTheKernelsVBlanksAndLeadsTheWorkDuration() async throws {
        var script = try Self.script()
        script.shell("vsyncd_start")
        try script.recordKernel("k")
        script.shell("follow p60 --work-duration 5; wait_ticks p60 5; sleep 4; mark change")
        // 60 → 144 Hz while p60 runs: it must find its feet soon after the new mode (see below).
        // p60 stops before the 144 Hz clients start, so their figures are not p60's load too.
        script.shell("hold 144; sleep 2; stop p60")
        script.shell("follow p144 --work-duration 5; follow q144 --work-duration 20; wait_ticks p144 5; wait_ticks q144 5; sleep 4")
        script.shell("stop p144; stop q144; release; sleep 0.2; stop k; vsyncd_stop; dump")
        let out = try await script.run(timeout: 400)
        #expect(out.result.status == 0 && out.errors.isEmpty && out.status("vsyncd") == 0, "\(out)")
        #expect(out.vblankMethod == "crtc-sequence", "vsyncd's vblank method on vkms: \(out.vblankMethod ?? "not logged")")

        let kernel = KernelRecord(out.all("k"))
        try #require(kernel.ordered.count > 500, "kernel recorder: \(out.all("k.err"))")
        // The mode change: where the record's progression turns to 144 Hz. (On Linux 6.1 it
        // paused > 50 ms; on 7.3 the mode set can be quicker than that, so the period tells.)
        let newMode = try #require(VBlankTruth(kernel: kernel, clients: []).segments.last { abs($0.periodNs - customModePeriodNs(144)) <= 1 },
                                   "no 144 Hz progression in the kernel record")
        let firstIndex = try #require(kernel.ordered.firstIndex { $0.sequence == newMode.firstSequence && $0.timestampNs == newMode.firstNs })
        try #require(firstIndex > 0, "the record starts in the new mode")
        let change = (before: kernel.ordered[firstIndex - 1], after: kernel.ordered[firstIndex])
        let newModeFirst = change.after.sequence

        for (name, work, hz) in [("p60", 5.0, 60.0), ("p144", 5.0, 144.0), ("q144", 20.0, 144.0)] {
            let ticks = Self.ticks(out, name)
            try #require(ticks.count > 100, "\(name): \(ticks.count) ticks; \(out.all("\(name).err"))")
            #expect(ticks.allSatisfy { $0.workDurationUs == work * 1000 })
            // The mode change's own frames are not held to it: targets aimed at vblanks that the
            // mode set removed, and the first 3 of the new mode.
            let settled = ticks.filter { !($0.targetSequence > change.before.sequence && $0.targetSequence < newModeFirst + 3) }
            let errors = Self.targetErrors(settled, kernel)
            // A vblank count the kernel itself skipped (its vblank timer fired more than a frame
            // late under TCG, and the count jumped over it) is a target no vblank ever met: not
            // the daemon's miss. Any other target missing from the record is, beyond 2.
            let unreached = settled.filter { kernel.timestamps[$0.targetSequence] == nil }.map(\.targetSequence)
            let skippedByKernel = unreached.filter(kernel.countJumpsOver)
            #expect(unreached.count - skippedByKernel.count <= 2, "\(name): \(unreached.count - skippedByKernel.count) targets the kernel never reached: \(unreached.filter { !kernel.countJumpsOver($0) }.prefix(8)); record \(kernel.ordered.first!.sequence)…\(kernel.ordered.last!.sequence), mode change \(change.before.sequence) → \(newModeFirst)")
            if !skippedByKernel.isEmpty { print("\(name): \(skippedByKernel.count) targets on vblank counts the kernel skipped: \(skippedByKernel.prefix(8))") }
            let wrong = errors.filter { abs($0.errorNs) > 1_000 }
            #expect(wrong.isEmpty, "\(name): targets off the kernel's vblank by > 1 µs: \(wrong.prefix(5).map { ($0.tick.targetSequence, $0.errorNs) })")
            // The newest vblank each tick names is the kernel's, to the nanosecond.
            // (The recorder may miss a vblank or two while a mode set turns the CRTC off and on.)
            let mismatched = ticks.filter { t in kernel.timestamps[t.seq].map { $0 != t.timestampNs } ?? false }
            // On a loaded host the recorder can come back from the mode set well after vsyncd
            // (a hole of 24 vblanks seen): the ticks in that hole are held to the new mode's
            // progression, extended back from its first recorded vblank (vkms's timer is exact).
            let inHole = { (t: PacedTick) in t.seq > change.before.sequence && t.seq < newModeFirst && kernel.timestamps[t.seq] == nil }
            let offGrid = ticks.filter(inHole).filter { t in
                let expected = Double(newMode.firstNs) - Double(newModeFirst - t.seq) * newMode.periodNs
                return abs(Double(t.timestampNs) - expected) > 1_000
            }
            #expect(offGrid.isEmpty, "\(name): ticks after the mode set, before the record resumed, off the new mode's vblanks: \(offGrid.prefix(5).map { ($0.seq, $0.timestampNs) }); new mode from \(newModeFirst) at \(newMode.firstNs), period \(newMode.periodNs) ns")
            let missing = ticks.filter { kernel.timestamps[$0.seq] == nil && !inHole($0) }
            #expect(mismatched.isEmpty, "\(name): ticks whose vblank time is not the kernel's: \(mismatched.prefix(5).map { ($0.seq, $0.timestampNs, kernel.timestamps[$0.seq] ?? 0) })")
            #expect(missing.count <= 5, "\(name): \(missing.count) ticks on vblanks the kernel record lacks: \(missing.prefix(5).map(\.seq)); record \(kernel.ordered.first!.sequence)…\(kernel.ordered.last!.sequence)")
            let badTargets = ticks.filter { !($0.targetSequence > $0.seq && $0.timelines.count == 4 && $0.timelines.first?.seq == $0.targetSequence) }
            #expect(badTargets.isEmpty, "\(name): \(badTargets.prefix(5).map { ($0.seq, $0.targetSequence, $0.timelines.count) })")
            // Woken W before the target, less the wake-ups' lateness. vsyncd owns the aim: never
            // early (a lead above W would be its own error). Late it is by its timer's wake-up
            // and its client's, each as late as the guest then wakes any process: the recorder's
            // read of the vblank nearest the wake gives that lateness (2 ms at p50 on a loaded
            // host, 40 ms at p99: a fixed W ± 3 ms timed the host). Beyond two of those, 3 ms at p50.
            let leads = ticks.map { $0.leadUs / 1000 }
            let p50 = Self.percentile(leads, 0.5), p99 = Self.percentile(leads, 0.99), p1 = Self.percentile(leads, 0.01)
            let maxError = errors.map { abs(Double($0.errorNs)) }.max() ?? .nan
            let beyond = ticks.compactMap { t -> Double? in
                guard let lag = Self.guestLateness(kernel, atNs: t.targetTimestampNs &- UInt64(work * 1e6)) else { return nil }
                return work - t.leadUs / 1000 - 2 * lag / 1e6
            }
            let excess = Self.percentile(beyond, 0.5)
            print("\(name) (\(Int(hz)) Hz, W \(Int(work)) ms): \(ticks.count) ticks, lead ms p50 \(String(format: "%.3f", p50)) p1 \(String(format: "%.3f", p1)) p99 \(String(format: "%.3f", p99)); target vs kernel max |error| \(maxError) ns over \(errors.count) ticks; short of W beyond two of the guest's wake-ups, ms p50 \(String(format: "%.3f", excess)) (bound 3) over \(beyond.count) ticks")
            #expect(p99 <= work + 0.1, "\(name): lead p99 \(p99) ms, above the work duration \(work) ms: woken early")
            #expect(beyond.count > ticks.count / 2 && excess <= 3, "\(name): lead p50 \(p50) ms, work duration \(work) ms, short of it beyond the guest's own lateness by \(excess) ms at p50")
        }
        // p60 across the mode change: every tick aimed at the new mode's 4th vblank or later is exact.
        let recovered = Self.targetErrors(Self.ticks(out, "p60").filter { $0.targetSequence >= newModeFirst + 3 }, kernel)
        #expect(recovered.count > 100 && recovered.allSatisfy { abs($0.errorNs) <= 1_000 }, "p60 after the mode change: \(recovered.filter { abs($0.errorNs) > 1_000 }.prefix(5).map { ($0.tick.targetSequence, $0.errorNs) })")
        // The first tick aimed at the new mode targets one of its first vblanks, exactly.
        let firstNew = try #require(Self.ticks(out, "p60").first { $0.targetSequence >= newModeFirst }, "p60 got no tick in the new mode")
        let into = firstNew.targetSequence - newModeFirst
        print("p60 across 60 → 144 Hz: first target in the new mode is its vblank \(into) (0 = the first), off the kernel's by \(Self.targetErrors([firstNew], kernel).first.map { "\($0.errorNs) ns" } ?? "?")")
        // Linux 7.3 relights a CRTC within 20 ms of a mode set (6.1 paused over 50 ms): the
        // daemon's off, re-read, on and first vblank of the new mode then fall within the frames
        // TCG's scheduling spreads them over, measured 0 to 7 at 144 Hz. Held to
        // `TickCheck.modeSetRecoveryNs`, in time rather than frames.
        #expect(Double(into) * 1e9 / 144 <= Double(TickCheck.modeSetRecoveryNs), "p60's first target in the new mode is \(into) frames in")
        #expect(Self.targetErrors([firstNew], kernel).first.map { abs($0.errorNs) <= 1_000 } == true)
        try Self.checkGenerations(out, "p60", changeBefore: change.before.sequence)
    }

    /// Protocol 4's configuration generation: across the mode set, the generation bumps exactly once per
    /// change the display events announce (off, on with the new mode, or the mode alone): ticks
    /// before it share one, the events' generations follow it one by one, and every later tick
    /// has one of those, ending at the last.
    static func checkGenerations(_ out: VsyncdGuestOutput, _ name: String, changeBefore: UInt64) throws {
        let ticks = Self.ticks(out, name)
        let g0 = try #require(ticks.first?.generation, "\(name): ticks without a generation")
        let events = out.all(name).filter { $0.hasPrefix("{\"event\"") }.compactMap {
            (try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])?["generation"] as? Int
        }.map { UInt32($0) }
        let announced = Set(events).sorted()
        #expect(!announced.isEmpty && announced == Array((g0 + 1)...(g0 + UInt32(max(announced.count, 1)))), "\(name): events' generations \(events) after \(g0)")
        let before = ticks.filter { $0.targetSequence <= changeBefore }
        #expect(before.allSatisfy { $0.generation == g0 }, "\(name): \(Set(before.compactMap(\.generation)).sorted()) before the mode set")
        let known = Set([g0] + announced)
        #expect(ticks.allSatisfy { $0.generation.map(known.contains) == true }, "\(name): \(Set(ticks.compactMap(\.generation)).sorted()) vs announced \(announced)")
        #expect(ticks.last?.generation == announced.last, "\(name): last tick \(ticks.last?.generation ?? 0), events \(announced)")
        // The first tick of each new generation judges its frame a mode change's.
        let firsts = zip(ticks, ticks.dropFirst()).filter { $0.generation != $1.generation }.map(\.1)
        #expect(!firsts.isEmpty && firsts.allSatisfy { $0.reason == "modeChange" }, "\(name): \(firsts.map { ($0.seq, $0.reason ?? "none") })")
    }

    // MARK: Predicted ticks while the CRTC is off

    @Test func predictedTicksWhileOffForTheClientThatAsked() async throws {
        var script = try Self.script()
        script.shell("vsyncd_start")
        try script.recordKernel("k")
        script.shell("follow a --predict-while-off; follow b; wait_ticks a 5; wait_ticks b 5; sleep 1")
        script.shell("modeset --hold 3 off on; sleep 2")
        script.shell("stop a; stop b; stop k; vsyncd_stop; dump")
        let out = try await script.run(timeout: 300)
        #expect(out.result.status == 0 && out.errors.isEmpty && out.status("vsyncd") == 0, "\(out)")

        let kernel = KernelRecord(out.all("k"))
        // The off interval is the longest pause in the record: a TCG guest the host keeps off its
        // CPU for a while makes vkms's timer overrun, and the kernel then counts several vblanks
        // at once, a shorter pause in the record that is not the CRTC being off.
        let off = try #require(kernel.gaps(longerThan: 100_000_000).max { $0.after.timestampNs - $0.before.timestampNs < $1.after.timestampNs - $1.before.timestampNs },
                               "no off interval in the kernel record")
        let periodNs = Double(off.before.timestampNs - kernel.ordered[0].timestampNs) / Double(off.before.sequence - kernel.ordered[0].sequence)
        #expect(off.after.timestampNs - off.before.timestampNs >= 2_500_000_000, "CRTC off for \(off.after.timestampNs - off.before.timestampNs) ns")

        let a = Self.ticks(out, "a"), b = Self.ticks(out, "b")
        let predicted = a.filter(\.isPredicted)
        // Predicted ticks fill the off interval at the mode's rate (the daemon notices "off" at once,
        // "on" within its 500 ms poll, so they cover most of the 3 s), counted by sequence: how
        // many a client in a TCG guest is scheduled to take is the host's load (each one missed
        // is counted in `skipped`, checked below).
        try #require(predicted.count >= 2 && predicted.last!.seq - predicted.first!.seq >= 100,
                     "predicted ticks over \(predicted.count >= 2 ? predicted.last!.seq - predicted.first!.seq : 0) frames (\(predicted.count) ticks); a: \(out.all("a").filter { $0.contains("event") })")
        // The daemon re-reads the CRTC once a predicted frame: predictions stop within a few frames
        // of the first real vblank.
        let late = predicted.filter { $0.timestampNs <= off.before.timestampNs || $0.timestampNs >= off.after.timestampNs + UInt64(3 * periodNs) }
        #expect(late.isEmpty, "predicted ticks outside the off interval: \(late.prefix(5).map { ($0.seq, Int64($0.timestampNs) - Int64(off.after.timestampNs)) })")
        let span = Double(predicted.last!.timestampNs - predicted.first!.timestampNs)
        let steps = Double(predicted.last!.seq - predicted.first!.seq)
        let predictedRate = 1e9 * steps / span, kernelRate = 1e9 / periodNs
        #expect(abs(predictedRate / kernelRate - 1) <= 0.001, "predicted \(predictedRate) Hz vs the kernel's \(kernelRate) Hz")
        for (x, y) in zip(predicted, predicted.dropFirst()) { #expect(y.seq - x.seq == 1 + UInt64(y.skipped)) }
        #expect(predicted.allSatisfy { $0.reason == "predictedWhileOff" }, "\(Set(predicted.map { $0.reason ?? "none" }))")
        // They came when their time came: the receipt rate is the mode's too (within 1 % under TCG).
        let receiptRate = 1e9 * Double(predicted.count - 1) / Double(predicted.last!.receivedNs - predicted.first!.receivedNs)
        #expect(abs(receiptRate / kernelRate - 1) <= 0.01 + Double(predicted.map(\.skipped).reduce(0, +)) / Double(predicted.count))
        // The client that did not ask got nothing in between: no tick between the CRTC's last
        // vblank and its first one back but a vblank of the relit CRTC, on its grid (the
        // recorder, retrying while the CRTC is off, may start a frame after the relight).
        let relit = try #require(VBlankTruth(kernel: kernel, clients: []).segment(containing: off.after.timestampNs), "no progression after on in the kernel record")
        let bInside = b.filter { $0.timestampNs > off.before.timestampNs && $0.timestampNs < off.after.timestampNs }
            .filter { abs(Double($0.timestampNs) - Double(relit.fit.predictedTimestamp(forSequence: $0.seq))) > TickCheck.progressionToleranceNs }
        #expect(bInside.isEmpty, "b got \(bInside.count) ticks while the CRTC was off: \(bInside.prefix(3).map { ($0.seq, $0.timestampNs) })")
        // Hardware again: a's first real tick after the gap is within a frame of b's.
        let aBack = try #require(a.first { !$0.isPredicted && $0.timestampNs >= off.after.timestampNs }, "a got no hardware tick after on")
        let bBack = try #require(b.first { $0.timestampNs >= off.after.timestampNs }, "b got no tick after on")
        #expect(aBack.seq <= bBack.seq + 1, "a back at \(aBack.seq), b at \(bBack.seq)")
        #expect(kernel.timestamps[aBack.seq] == aBack.timestampNs)
        let lastPredicted = predicted.last!
        print("off \(Double(off.after.timestampNs - off.before.timestampNs) / 1e9) s: \(predicted.count) predicted ticks at \(String(format: "%.4f", predictedRate)) Hz (kernel \(String(format: "%.4f", kernelRate)) Hz), receipt \(String(format: "%.3f", receiptRate)) Hz; last predicted seq \(lastPredicted.seq), kernel resumed at \(off.after.sequence) (\(Int64(off.after.sequence) - Int64(lastPredicted.seq)) later; by elapsed time \(String(format: "%.1f", Double(Int64(off.after.timestampNs) - Int64(lastPredicted.timestampNs)) / periodNs)) frames); a back at seq \(aBack.seq), b at \(bBack.seq)")
    }

    // MARK: A display lit after vsyncd started

    @Test func aSubscriptionToPrimaryWaitsForACRTCLitLater() async throws {
        var script = try Self.script()
        // The only CRTC is off before vsyncd starts, and lit a second after the subscription (not
        // at a set time after the off: starting vsyncd, the recorder and a client in a TCG guest
        // on a loaded host once took more than the 6 s that allowed).
        script.shell("hold off")
        script.shell("vsyncd_start")
        try script.recordKernel("k")
        script.shell("follow late; wait_ticks late 1; mark subscribed")
        script.shell("sleep 1; release; modeset --hold 0 on; wait_ticks late 30")
        script.shell("stop late; stop k; vsyncd_stop; dump")
        let out = try await script.run(timeout: 300)
        #expect(out.result.status == 0 && out.errors.isEmpty && out.status("vsyncd") == 0, "\(out)")
        #expect(out.log.contains { $0.contains("0 display(s)") }, "vsyncd started with a display: \(out.log.prefix(5))")

        let lines = out.all("late")
        let waiting = try #require(lines.firstIndex { $0.contains("\"event\":\"waiting\"") }, "no waiting event: \(lines.prefix(5))")
        let added = try #require(lines.firstIndex { $0.contains("\"event\":\"added\"") }, "no added event: \(lines.prefix(5))")
        let firstTick = try #require(lines.firstIndex { $0.hasPrefix("{\"seq\"") }, "no tick")
        #expect(waiting < added && added < firstTick)
        #expect(out.status("late") == 0, "\(out.all("late.err"))")

        let kernel = KernelRecord(out.all("k"))
        let lit = try #require(kernel.ordered.first, "the kernel recorded no vblank")
        let subscribed = try #require(out.mark("subscribed"))
        #expect(lit.timestampNs > subscribed + 1_000_000_000, "CRTC lit \(Double(Int64(lit.timestampNs) - Int64(subscribed)) / 1e9) s after the subscription")
        let ticks = Self.ticks(out, "late")
        #expect(ticks.count >= 30)
        let first = try #require(ticks.first)
        let delay = Double(first.receivedNs - lit.timestampNs) / 1e9
        print("CRTC lit \(String(format: "%.3f", Double(lit.timestampNs - subscribed) / 1e9)) s after the subscription; first tick \(String(format: "%.3f", delay)) s after the first vblank")
        #expect(first.receivedNs >= lit.timestampNs && delay <= 1.0, "first tick \(delay) s after the first vblank")
        #expect(ticks.allSatisfy { kernel.timestamps[$0.seq] == $0.timestampNs })
    }
}
