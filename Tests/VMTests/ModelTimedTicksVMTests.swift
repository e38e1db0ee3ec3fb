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

        var dead: [(seq: UInt64, offNs: Int64)] = []
        for t in ticks {
            let expected: Double
            if let real = kernel.timestamps[t.seq] {
                expected = Double(real)
            } else if let next = truth.segments.first(where: { $0.lastSequence >= t.seq }) {
                expected = Double(next.fit.predictedTimestamp(forSequence: t.seq))
            } else {
                continue
            }
            let off = Int64(Double(t.timestampNs) - expected)
            if abs(off) > Self.maxErrorNs { dead.append((t.seq, off)) }
        }
        #expect(dead.isEmpty, "ticks off the kernel's vblanks: \(dead.prefix(8)); the record's progressions: \(truth.segments.map { "\($0.firstSequence)…\($0.lastSequence) at \(Int($0.periodNs)) ns" })")
        try FramePacingVMTests.checkGenerations(out, "p", changeBefore: first.lastSequence)
    }
}
