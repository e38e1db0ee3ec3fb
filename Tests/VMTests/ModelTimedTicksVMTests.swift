import Foundation
import Testing
import VsyncCore

/// `vsyncd --vblank-sampling sparse`: between bursts a tick's time and sequence come from the
/// refresh model, not from a kernel event. Here the kernel recorder keeps its own requests
/// queued, so the CRTC's interrupt stays on and the kernel's record has every vblank: each
/// model-timed tick is held to the vblank the kernel gave that sequence.
@Suite(.serialized)
struct ModelTimedTicksVMTests {
    /// A model-timed tick within 20 µs of the kernel's vblank (the bound vsyncd(8) states for
    /// sparse sampling), and within 5 µs at p99.
    static let maxErrorNs: Int64 = 20_000
    static let p99ErrorNs: Int64 = 5_000

    @Test func modelTimedTicksAreTheKernelsVBlanks() async throws {
        var script = try FramePacingVMTests.script()
        try script.recordKernel("k")
        script.shell("vsyncd_start --vblank-sampling sparse")
        script.shell("follow f60 --fps 60; wait_ticks f60 5; sleep 15")
        script.shell("stop f60; stop k; vsyncd_stop; dump")
        let out = try await script.run(timeout: 300)
        #expect(out.result.status == 0 && out.errors.isEmpty && out.status("vsyncd") == 0, "\(out)")

        let kernel = KernelRecord(out.all("k"))
        try #require(kernel.ordered.count > 600, "kernel recorder: \(out.all("k.err"))")
        let ticks = out.ticks("f60")
        let modelTimed = ticks.filter { $0.flags.contains("modelTimed") }
        // Warm after 24 vblanks and a first burst: most of 15 s is between bursts.
        #expect(modelTimed.count * 2 >= ticks.count, "\(modelTimed.count) of \(ticks.count) ticks model-timed")
        try #require(modelTimed.count >= 300, "\(modelTimed.count) model-timed ticks of \(ticks.count)")

        // Sequence equal: the kernel gave that sequence, and at the time the model said.
        let unrecorded = modelTimed.filter { kernel.timestamps[$0.seq] == nil }.map(\.seq)
        #expect(unrecorded.count <= 2, "model-timed ticks on sequences the kernel record lacks: \(unrecorded.prefix(8))")
        let errors = modelTimed.compactMap { t in kernel.timestamps[t.seq].map { Double(abs(Int64(bitPattern: t.timestampNs &- $0))) } }
        let p50 = FramePacingVMTests.percentile(errors, 0.5), p99 = FramePacingVMTests.percentile(errors, 0.99)
        let worst = errors.max() ?? 0
        print("model-timed ticks against the kernel's record: \(errors.count) ticks, |error| p50 \(Int(p50)) ns, p99 \(Int(p99)) ns, max \(Int(worst)) ns")
        #expect(worst <= Double(Self.maxErrorNs), "a model-timed tick \(worst) ns off the kernel's vblank")
        #expect(p99 <= Double(Self.p99ErrorNs), "model-timed ticks p99 \(p99) ns off the kernel's vblanks")
        // Every vblank counted: a gap in sequences is what the tick says it skipped.
        for (a, b) in zip(ticks, ticks.dropFirst()) {
            #expect(b.seq > a.seq && Int(b.seq - a.seq) - 1 == b.skipped, "f60: \(a.seq) → \(b.seq), skipped \(b.skipped)")
        }
    }

    /// Interrupt-time stamps (`drm.timestamp_precision_usec=0`: the kernel stamps each vblank when
    /// its interrupt runs, tens of µs late and jittery under TCG) never make the model confident:
    /// sparse sampling stays continuous, and every tick is a hardware one.
    @Test func interruptStampsKeepSamplingContinuous() async throws {
        var script = try FramePacingVMTests.script()
        script.append = "drm.timestamp_precision_usec=0"
        script.shell("vsyncd_start --vblank-sampling sparse")
        script.shell("follow f60 --fps 60; wait_ticks f60 5; sleep 10")
        script.shell("stop f60; vsyncd_stop; dump")
        let out = try await script.run(timeout: 300)
        #expect(out.result.status == 0 && out.errors.isEmpty && out.status("vsyncd") == 0, "\(out)")
        let ticks = out.ticks("f60")
        try #require(ticks.count >= 300, "\(ticks.count) ticks; \(out.all("f60.err"))")
        let modelTimed = ticks.filter { $0.flags.contains("modelTimed") }
        print("interrupt stamps, sparse sampling: \(modelTimed.count) of \(ticks.count) ticks model-timed")
        #expect(modelTimed.isEmpty, "model-timed ticks on interrupt stamps: \(modelTimed.prefix(5).map(\.seq))")
        #expect(ticks.allSatisfy { $0.flags.contains("hardware") }, "\(Set(ticks.map(\.flags)))")
    }

    /// How far `t` lies from the progression through hardware vblank `h` (ns).
    static func offGrid(_ t: FollowTick, from h: FollowTick) -> Int64 {
        Int64(Double(t.timestampNs) - (Double(h.timestampNs) + Double(t.seq - h.seq) * Double(t.durationNs)))
    }

    /// vkms restarts its vblank timer relative to now at every enable, so with the interrupt off
    /// between bursts (`drm.vblankoffdelay=-1`, as i915 and amdgpu behave) each burst finds the
    /// phase moved. After a burst's hardware vblank, no model-timed tick may land on the old grid:
    /// each lies on the progression of the last hardware vblank before it, within 20 µs.
    @Test func afterABurstNoTickLandsOnTheOldGrid() async throws {
        var script = try FramePacingVMTests.script()
        script.append = "drm.vblankoffdelay=-1"
        // fbcon's blinking cursor commits take vblank references of their own.
        script.shell("echo 0 > /sys/class/graphics/fbcon/cursor_blink")
        script.shell("vsyncd_start --vblank-sampling sparse")
        script.shell("follow f60 --fps 60; wait_ticks f60 5; sleep 15")
        script.shell("stop f60; vsyncd_stop; dump")
        let out = try await script.run(timeout: 300)
        #expect(out.result.status == 0 && out.errors.isEmpty && out.status("vsyncd") == 0, "\(out)")
        let ticks = out.ticks("f60")
        try #require(ticks.count >= 600, "\(ticks.count) ticks; \(out.all("f60.err"))")
        var last: FollowTick?
        var checked = 0, bursts = 0, moved = 0
        var offTheGrid: [(seq: UInt64, offNs: Int64)] = []
        for t in ticks {
            if t.flags.contains("hardware") {
                if let h = last, t.seq > h.seq + 1 {
                    bursts += 1
                    // Where the previous grid put this vblank: vkms's restarted timer moves it.
                    if abs(Self.offGrid(t, from: h)) > Self.maxErrorNs { moved += 1 }
                }
                last = t
                continue
            }
            guard t.flags.contains("modelTimed"), let h = last, t.seq > h.seq else { continue }
            let off = Self.offGrid(t, from: h)
            checked += 1
            if abs(off) > Self.maxErrorNs { offTheGrid.append((t.seq, off)) }
        }
        print("vkms's restarted timer, sparse sampling: \(checked) model-timed ticks after \(bursts) bursts (\(moved) of them found the phase moved), \(offTheGrid.count) off the last hardware vblank's grid")
        #expect(bursts >= 3, "\(bursts) bursts in 15 s")
        #expect(moved >= 1, "no burst found the phase moved: the test did not see vkms restart its timer")
        #expect(checked >= 300, "\(checked) model-timed ticks checked")
        #expect(offTheGrid.isEmpty, "model-timed ticks off the last burst's grid: \(offTheGrid.prefix(5))")
    }

    /// Sparse sampling across a mode change (60 → 144 Hz) and an off/on (lit at 60 Hz): one
    /// generation per display event, the first tick of each judged a mode change's frame, and
    /// no tick on a dead grid: each tick is the kernel's vblank of its sequence (the recorder
    /// holds the interrupt on, so its record is the truth), or, in the record's hole after a
    /// mode set, on the progression that follows it.
    @Test func displayEventsDuringSparseSamplingLeaveNoTickOnADeadGrid() async throws {
        var script = try FramePacingVMTests.script()
        try script.recordKernel("k")
        script.shell("vsyncd_start --vblank-sampling sparse")
        script.shell("follow p; wait_ticks p 5; sleep 6")
        script.shell("hold 144; sleep 5; release; sleep 5; modeset --hold 2 off on; sleep 5")
        script.shell("stop p; stop k; vsyncd_stop; dump")
        let out = try await script.run(timeout: 400)
        #expect(out.result.status == 0 && out.errors.isEmpty && out.status("vsyncd") == 0, "\(out)")

        let kernel = KernelRecord(out.all("k"))
        try #require(kernel.ordered.count > 1000, "kernel recorder: \(out.all("k.err"))")
        let truth = VBlankTruth(kernel: kernel, clients: [])
        let first = try #require(truth.segments.first, "no progression in the kernel record")
        let ticks = FramePacingVMTests.ticks(out, "p")
        let warm = ticks.filter { $0.seq <= first.lastSequence && $0.flags.contains("modelTimed") }
        let after = ticks.filter { $0.seq > (truth.segments.last?.firstSequence ?? .max) + 24 && $0.flags.contains("modelTimed") }
        print("sparse sampling across a mode change and an off/on: \(ticks.count) ticks, \(warm.count) model-timed before the mode set, \(after.count) after the last event, \(truth.segments.count) progressions in the record")
        #expect(warm.count >= 100, "\(warm.count) model-timed ticks before the mode set: sparse sampling never began")
        #expect(after.count >= 50, "\(after.count) model-timed ticks after the last event: sparse sampling did not come back")

        let dead = Self.deadGridTicks(ticks, kernel: kernel, truth: truth)
        #expect(dead.isEmpty, "ticks off the kernel's vblanks: \(dead.prefix(8)); the record's progressions: \(truth.segments.map { "\($0.firstSequence)…\($0.lastSequence) at \(Int($0.periodNs)) ns" })")
        try FramePacingVMTests.checkGenerations(out, "p", changeBefore: first.lastSequence)
    }

    /// Each tick is the kernel's vblank of its sequence (the recorder holds the interrupt on, so
    /// its record is the truth) or, in the record's holes, on the progression that follows them:
    /// those that are not, with how far off they are.
    static func deadGridTicks(_ ticks: [FramePacingVMTests.PacedTick], kernel: KernelRecord, truth: VBlankTruth) -> [(seq: UInt64, offNs: Int64)] {
        ticks.compactMap { t in
            let expected: Double
            if let real = kernel.timestamps[t.seq] {
                expected = Double(real)
            } else if let next = truth.segments.first(where: { $0.lastSequence >= t.seq }) {
                expected = Double(next.fit.predictedTimestamp(forSequence: t.seq))
            } else {
                return nil
            }
            let off = Int64(Double(t.timestampNs) - expected)
            return abs(off) > Self.maxErrorNs ? (t.seq, off) : nil
        }
    }

    static func eventGenerations(_ out: VsyncdGuestOutput, _ name: String) -> [Int] {
        out.all(name).filter { $0.hasPrefix("{\"event\"") && !$0.contains("\"added\"") }.compactMap {
            (try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])?["generation"] as? Int
        }
    }

    /// Sparse sampling across a suspend-like gap (vsyncd stopped 3 s with SIGSTOP and continued:
    /// the display runs on, so nothing changed and no generation may come of it) and a hotplug
    /// (a configfs connector unplugged and plugged again with no master: the kernel's fbdev
    /// client turns its CRTC off and relights it): one generation each for the off and the
    /// relight, no tick between them, and no tick on a dead grid; model-timed ticks before, between and
    /// after.
    @Test func aStopAndAHotplugDuringSparseSamplingLeaveNoTickOnADeadGrid() async throws {
        var script = try HotplugVMTests.script()
        script.layoutUp(HotplugVMTests.layout)
        script.shell("vsyncd_start --vblank-sampling sparse")
        try script.recordKernelOnLayout("k", only: ["dock.1"])
        script.shell("follow p --display \"$CONN_dock_1\"; wait_line p modelTimed; sleep 3")
        script.shell("mark stop; kill -STOP $VSYNCD; sleep 3; kill -CONT $VSYNCD; mark cont")
        // Two seconds of frames at 75 Hz after the stop: bursts and model-timed ticks again.
        script.shell("n=$(wc -l </tmp/c.p.out); wait_ticks p $((n + 150)); mark unplug")
        script.layout("unplug dock.1")
        script.shell("wait_connector \"$CONN_dock_1\" disabled; sleep 2; mark plug")
        script.layout("plug dock.1")
        // Until the relit display is model-timed again (a follower that never resumes ends the
        // wait after 30 s with an error line): four seconds of frames.
        script.shell("wait_connector \"$CONN_dock_1\" enabled; n=$(wc -l </tmp/c.p.out); wait_ticks p $((n + 300)); mark end")
        script.shell("stop p; stop k; vsyncd_stop; dump")
        let out = try await script.run(timeout: 400)
        #expect(out.result.status == 0 && out.errors.isEmpty && out.status("vsyncd") == 0, "\(out)")
        let stop = try #require(out.mark("stop")), cont = try #require(out.mark("cont"))
        let unplug = try #require(out.mark("unplug")), plug = try #require(out.mark("plug"))

        let kernel = try HotplugVMTests.record(out, "dock.1").kernel
        let truth = VBlankTruth(kernel: kernel, clients: [])
        let dark = try #require(kernel.gaps(longerThan: 1_000_000_000).first { $0.before.timestampNs < plug && $0.after.timestampNs > plug },
                                "no dark spell across the plug step in the kernel's record: \(kernel.gaps(longerThan: 100_000_000).map { ($0.before, $0.after) })")
        let ticks = FramePacingVMTests.ticks(out, "p")
        let modelTimed = ticks.filter { $0.flags.contains("modelTimed") }
        let before = modelTimed.filter { $0.timestampNs < stop }.count
        let between = modelTimed.filter { $0.timestampNs > cont && $0.timestampNs < unplug }.count
        let after = modelTimed.filter { $0.timestampNs > dark.after.timestampNs }.count
        // The largest step in sequence between ticks around the stop: the vblanks it lasted.
        let around = ticks.filter { $0.timestampNs &+ 2_000_000_000 > stop && $0.timestampNs < unplug }
        let gap = zip(around, around.dropFirst()).map { Int($1.seq) - Int($0.seq) }.max() ?? 0
        let events = HotplugVMTests.events(out, "p")
        print("sparse sampling across a 3 s stop and an unplug/plug: \(ticks.count) ticks, model-timed \(before) before the stop, \(between) after it, \(after) after the replug; \(gap) vblanks between ticks across the stop; events \(events)")
        #expect(before >= 50 && between >= 50 && after >= 50, "model-timed ticks: \(before) before the stop, \(between) after, \(after) after the replug")
        #expect(gap >= 150, "\(gap) vblanks between ticks across a 3 s stop at 75 Hz")
        // fbdev relights the CRTC in its own mode (60 Hz, not the layout's 75): `on` is then
        // followed by `modeChanged`, the two sharing the relight's one generation (PROTOCOL.md § 5).
        let told = events.filter { $0 != "added" }
        #expect(told == ["off", "on"] || told == ["off", "on", "modeChanged"], "events: \(events)")
        #expect(Set(Self.eventGenerations(out, "p")).count == 2, "events' generations: \(Self.eventGenerations(out, "p"))")
        let off = try #require(HotplugVMTests.event(out, "p", "off")), on = try #require(HotplugVMTests.event(out, "p", "on"))
        let inDark = out.all("p")[off.line..<on.line].filter { $0.hasPrefix("{\"seq\"") }
        #expect(inDark.isEmpty, "ticks between off and on: \(inDark)")
        let dead = Self.deadGridTicks(ticks, kernel: kernel, truth: truth)
        #expect(dead.isEmpty, "ticks off the kernel's vblanks: \(dead.prefix(8)); the record's progressions: \(truth.segments.map { "\($0.firstSequence)…\($0.lastSequence) at \(Int($0.periodNs)) ns" })")
        // One generation each for off and on; none for the stop (every tick before the dark
        // spell has the first generation).
        try FramePacingVMTests.checkGenerations(out, "p", changeBefore: dark.before.sequence)
    }
}
