import Foundation
import Testing
import VsyncCore

/// `vsyncd --vblank-sampling sparse` on vkms, booted as i915 and amdgpu behave
/// (`drm.vblankoffdelay=-1`: the last vblank reference turns the interrupt off at once) with the
/// kernel logging each enable and disable of the CRTC's vblank interrupt (`drm.debug=0x1`): how
/// long the interrupt is on, from the kernel's own log, while a page-only client (`vsync-probe
/// page`: no ticks, the timing page read every 50 ms) follows the display alone, then with a
/// 60 fps client and a paced one (W = 4 ms). Made for a loaded host: each window opens on the
/// clients' first model-timed tick or read, not after a fixed sleep, and a daemon read so late
/// that its requests ran out (the interrupt off and on, vkms's phase moved) must not cost a
/// fallback.
@Suite(.serialized)
struct SparseSamplingVMTests {
    /// A printk time ("[   28.853113]") in µs, and the rest of the line.
    static func kernelTime(_ line: String) -> (us: Int64, text: String)? {
        guard let open = line.firstIndex(of: "["), let close = line.firstIndex(of: "]") else { return nil }
        let parts = line[line.index(after: open)..<close].trimmingCharacters(in: .whitespaces).split(separator: ".")
        guard parts.count == 2, let s = Int64(parts[0]), let us = Int64(parts[1]) else { return nil }
        return (s * 1_000_000 + us, String(line[line.index(after: close)...]))
    }

    /// Time the interrupt was on between the two marks, from the kernel's enable/disable lines.
    static func onTimeUs(_ lines: [String], from start: Int64, to end: Int64) -> Int64 {
        var on: Int64? = nil
        var total: Int64 = 0
        var first = true
        for line in lines {
            guard let (t, text) = kernelTime(line), t >= start, t <= end else { continue }
            if text.contains("enabling vblank") {
                on = t
            } else if text.contains("disabling vblank") {
                total += t - (on ?? (first ? start : t))
                on = nil
            }
            first = false
        }
        if let on { total += end - on }
        return total
    }

    /// One read of `vsync-probe page --json`.
    struct PageRead: Decodable {
        var readNs: UInt64
        var nextSequence: UInt64
        var nextTimestampNs: UInt64
        var periodNs: Double
        var lastSequence: UInt64
        var lastTimestampNs: UInt64
        var lastAgeUs: Double
        var flags: [String]
    }

    static func pageReads(_ out: VsyncdGuestOutput, _ name: String) -> [PageRead] {
        out.all(name).filter { $0.hasPrefix("{\"readNs\"") }.compactMap { try? JSONDecoder().decode(PageRead.self, from: Data($0.utf8)) }
    }

    /// The interrupt's time on between two kernel marks, and its enables there (before the
    /// script stops it, fbcon's cursor blink takes and drops a reference five times a second,
    /// which is not vsyncd's doing, so only the window counts).
    static func duty(_ kernel: [String], _ from: String, _ to: String) throws -> (onMs: Int64, spanMs: Int64, duty: Double, enables: Int) {
        let marks = kernel.filter { $0.contains("vsync-mark") }
        let start = try #require(kernel.first { $0.contains(from) }.flatMap(Self.kernelTime)?.us, "no \(from) in the kernel's log of \(kernel.count) lines; its marks: \(marks)")
        let end = try #require(kernel.first { $0.contains(to) }.flatMap(Self.kernelTime)?.us, "no \(to) in the kernel's log of \(kernel.count) lines; its marks: \(marks)")
        let on = Self.onTimeUs(kernel, from: start, to: end)
        let enables = kernel.filter { line in
            line.contains("enabling vblank") && Self.kernelTime(line).map { $0.us >= start && $0.us <= end } == true
        }.count
        return (on / 1000, (end - start) / 1000, Double(on) / Double(end - start), enables)
    }

    @Test func theVBlankInterruptSleepsOnceWarm() async throws {
        var script = try VsyncdGuestScript()
        script.hostTSC = true
        script.append = "drm.vblankoffdelay=-1 drm.debug=0x1 log_buf_len=64M"
        // fbcon's blinking cursor commits to the CRTC several times a second, each commit taking
        // and dropping a vblank reference: not vsyncd's doing, so it is stopped.
        script.shell("echo 0 > /sys/class/graphics/fbcon/cursor_blink")
        script.shell("vsyncd_start --vblank-sampling sparse --log-level debug")
        // The page-only client alone; warm once its reads say the display is model-timed (the
        // interrupt slept after the model became confident).
        script.shell("page pg --interval 50; wait_line pg modelTimed")
        script.shell("mark pwarm; echo vsync-mark-pwarm > /dev/kmsg; sleep 12; echo vsync-mark-pend > /dev/kmsg; mark pend")
        script.shell("follow f60 --fps 60; follow paced --fps 60 --work-duration 4")
        // Warm: both clients subscribed, the model learned and the interrupt slept after the last
        // subscriber's burst: each client's first model-timed tick, waited for (a client can take
        // many seconds to start in a guest on a busy host, so no fixed sleep stands in for it).
        script.shell("wait_line f60 modelTimed; wait_line paced modelTimed")
        script.shell("mark warm; echo vsync-mark-warm > /dev/kmsg; sleep 12; echo vsync-mark-end > /dev/kmsg; mark end")
        script.shell("dmesg | grep -E 'vblank on crtc|vsync-mark' | sed 's/^/@@kernel /'")
        script.shell("stop f60; stop paced; stop pg; vsyncd_stop; dump")
        let out = try await script.run(timeout: 400)
        #expect(out.errors.isEmpty, "\(out.errors)")
        #expect(out.result.status == 0, "the guest script: \(out.result.status); its marks: \(out.all("mark"))")
        let kernel = out.all("kernel")
        for (phase, from, to) in [("page-only client alone", "vsync-mark-pwarm", "vsync-mark-pend"), ("page-only, 60 fps and paced clients", "vsync-mark-warm", "vsync-mark-end")] {
            let d = try Self.duty(kernel, from, to)
            print("sparse sampling on vkms, \(phase): vblank interrupt on \(d.onMs) ms of \(d.spanMs) ms once warm (\(DecimalText.fixed(d.duty * 100, places: 1)) %), \(d.enables) enables in it")
            #expect(d.duty <= 0.05, "\(phase): \(kernel.joined(separator: "\n"))")
            // Bursts went on: the model was checked against real vblanks about every 2 s.
            #expect(d.enables >= 4, "\(phase): \(kernel.joined(separator: "\n"))")
        }
        // In the window the clients were ticked throughout, mostly by the model, every gap
        // counted. How many ticks a client reads is the guest's scheduling of it (a starved
        // debug-build client on a busy host reads a few a second), so what is checked is what the
        // daemon owns: no tickless stretch longer than a burst interval and a half, and the
        // sequence numbers accounting for every vblank between ticks.
        let from = try #require(out.mark("warm")), to = try #require(out.mark("end"))
        for name in ["f60", "paced"] {
            let all = out.ticks(name)
            let ticks = all.filter { $0.timestampNs >= from && $0.timestampNs <= to }
            let summary = out.summary(name).map { "\($0)" } ?? "no summary"
            #expect(ticks.count >= 12, "\(name): \(summary)")
            #expect(ticks.filter { $0.flags.contains("modelTimed") }.count * 4 >= ticks.count * 3, "\(name): \(summary)")
            let edges = [from] + ticks.map(\.timestampNs) + [to]
            let gap = zip(edges, edges.dropFirst()).map { $1 &- $0 }.max() ?? 0
            #expect(gap <= 3_000_000_000, "\(name): \(gap / 1_000_000) ms without a tick")
            for (a, b) in zip(all, all.dropFirst()) where name == "f60" {
                #expect(b.seq > a.seq && Int(b.seq - a.seq) - 1 == b.skipped, "\(name): \(a.seq) → \(b.seq), skipped \(b.skipped)")
            }
        }
        try Self.checkPage(out, windows: [(try #require(out.mark("pwarm")), try #require(out.mark("pend"))), (from, to)])
    }

    /// The page-only client's reads in each window: the record lit and current throughout, its
    /// last real vblank moved by the bursts and never more than two burst intervals old,
    /// and each prediction within the sparse-sampling bound of the progression through that
    /// vblank. With the 60 fps client there, its hardware ticks are the kernel's vblanks: the
    /// record's last vblank is the kernel's stamp of its sequence, to the ns.
    static func checkPage(_ out: VsyncdGuestOutput, windows: [(UInt64, UInt64)]) throws {
        let hardware = Dictionary(out.ticks("f60").filter { $0.flags.contains("hardware") }.map { ($0.seq, $0.timestampNs) }) { a, _ in a }
        for (from, to) in windows {
            let reads = Self.pageReads(out, "pg").filter { $0.readNs >= from && $0.readNs <= to }
            let stale = reads.filter { !$0.flags.contains("lit") || !$0.flags.contains("current") }
            let oldest = reads.map(\.lastAgeUs).max() ?? 0
            let vblanks = Set(reads.map(\.lastSequence))
            let offGrid = reads.filter { r in
                let grid = Double(r.lastTimestampNs) + Double(r.nextSequence - r.lastSequence) * r.periodNs
                return abs(Double(r.nextTimestampNs) - grid) > Double(ModelTimedTicksVMTests.maxErrorNs)
            }
            let known = reads.filter { hardware[$0.lastSequence] != nil }
            let mismatched = known.filter { hardware[$0.lastSequence] != $0.lastTimestampNs }
            let foretold = reads.compactMap { r in hardware[r.nextSequence].map { Int64(bitPattern: r.nextTimestampNs &- $0) } }
            // Not held to the bound: a read between bursts foretells a vblank on the grid the
            // interrupt slept on, and vkms restarts its timer (moves the phase) at the enable.
            print("page predictions of vblanks the 60 fps client got as hardware ticks: \(foretold.count), off by \(foretold.map { abs($0) }.sorted().suffix(5)) ns")
            print("timing page under sparse sampling: \(reads.count) reads, \(stale.count) not current, \(vblanks.count) distinct last vblanks, oldest \(Int(oldest / 1000)) ms, \(offGrid.count) predictions off the last vblank's progression, \(known.count) last vblanks checked against hardware ticks (\(mismatched.count) differ)")
            #expect(reads.count >= 24, "\(reads.count) page reads in the window")
            #expect(stale.isEmpty, "reads not lit and current: \(stale.prefix(3))")
            #expect(vblanks.count >= 4, "the record's last vblank: \(vblanks.sorted())")
            // Two burst intervals: a burst the guest made late is allowed, a missed one is not.
            #expect(oldest <= 2 * Double(VBlankSampling.burstIntervalNs) / 1000, "the record's last vblank \(Int(oldest / 1000)) ms old")
            #expect(offGrid.isEmpty, "predictions off the last vblank's progression: \(offGrid.prefix(3))")
            #expect(mismatched.isEmpty, "the record's last vblank is not the kernel's: \(mismatched.prefix(3))")
        }
    }
}
