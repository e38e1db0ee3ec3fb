import Foundation
import Testing
import VsyncCore

/// `vsyncd --vblank-sampling sparse` on vkms, booted as i915 and amdgpu behave
/// (`drm.vblankoffdelay=-1`: the last vblank reference turns the interrupt off at once) with the
/// kernel logging each enable and disable of the CRTC's vblank interrupt (`drm.debug=0x1`): how
/// long the interrupt is on, from the kernel's own log, while a 60 fps client and a paced one
/// (W = 4 ms) follow the display. Made for a loaded host: the window opens on the clients' first
/// model-timed ticks, not after a fixed sleep, and a daemon read so late that its requests ran out
/// (the interrupt off and on, vkms's phase moved) must not cost a fallback.
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

    @Test func theVBlankInterruptSleepsOnceWarm() async throws {
        var script = try VsyncdGuestScript()
        script.hostTSC = true
        script.append = "drm.vblankoffdelay=-1 drm.debug=0x1 log_buf_len=64M"
        // fbcon's blinking cursor commits to the CRTC several times a second, each commit taking
        // and dropping a vblank reference: not vsyncd's doing, so it is stopped.
        script.shell("echo 0 > /sys/class/graphics/fbcon/cursor_blink")
        script.shell("vsyncd_start --vblank-sampling sparse --log-level debug")
        script.shell("follow f60 --fps 60; follow paced --fps 60 --work-duration 4")
        // Warm: both clients subscribed, the model learned and the interrupt slept after the last
        // subscriber's burst: each client's first model-timed tick, waited for (a client can take
        // many seconds to start in a guest on a busy host, so no fixed sleep stands in for it).
        script.shell("wait_line f60 modelTimed; wait_line paced modelTimed")
        script.shell("mark warm; echo vsync-mark-warm > /dev/kmsg; sleep 12; echo vsync-mark-end > /dev/kmsg; mark end")
        script.shell("dmesg | grep -E 'vblank on crtc|vsync-mark' | sed 's/^/@@kernel /'")
        script.shell("stop f60; stop paced; vsyncd_stop; dump")
        let out = try await script.run(timeout: 300)
        let kernel = out.all("kernel")
        let warm = try #require(kernel.first { $0.contains("vsync-mark-warm") }.flatMap(Self.kernelTime)?.us, "\(out)")
        let end = try #require(kernel.first { $0.contains("vsync-mark-end") }.flatMap(Self.kernelTime)?.us, "\(out)")
        let on = Self.onTimeUs(kernel, from: warm, to: end)
        let duty = Double(on) / Double(end - warm)
        // Enables in the window only: before the script stops it, fbcon's cursor blink takes and
        // drops a reference five times a second, which is not vsyncd's doing.
        let enables = kernel.filter { line in
            line.contains("enabling vblank") && Self.kernelTime(line).map { $0.us >= warm && $0.us <= end } == true
        }.count
        print("sparse sampling on vkms: vblank interrupt on \(on / 1000) ms of \((end - warm) / 1000) ms once warm (\(DecimalText.fixed(duty * 100, places: 1)) %), \(enables) enables in it")
        #expect(out.errors.isEmpty, "\(out.errors)")
        #expect(duty <= 0.05, "\(kernel.joined(separator: "\n"))")
        // Bursts went on: the model was checked against real vblanks about every 2 s.
        #expect(enables >= 4, "\(kernel.joined(separator: "\n"))")
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
    }
}
