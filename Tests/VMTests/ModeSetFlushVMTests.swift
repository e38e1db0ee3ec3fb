import Foundation
import Testing

/// On vkms: a compositor's mode set while vsyncd ticks. A DRM master
/// (Tests/vm-tools/fenced-modeset.c) commits each new mode nonblocking, held on a fence as a
/// compositor's commit waits for its GPU: the new mode is readable at once, and vsyncd's
/// once-a-second re-read finds it. The fence signals the moment a client prints vsyncd's
/// `modeChanged` (1.5 s at the latest): the CRTC is then turned off for the mode set and the
/// kernel flushes vsyncd's pending vblank requests with the old mode's last count and time,
/// usually before the old mode's next vblank. Every vblank must be ticked once, with the
/// kernel's time. (A daemon that trusted the flushed event ticked that vblank again.)
@Suite(.serialized)
struct ModeSetFlushVMTests {
    @Test func aVBlankFlushedByACompositorsModeSetIsTickedOnce() async throws {
        let modes = [75.0, 60.0, 75.0, 60.0, 75.0, 60.0]
        var script = try VsyncdGuestScript()
        script.shell("vsyncd_start")
        try script.recordKernel("k")
        script.shell("raw full 0")
        script.shell("wait_ticks full 10")
        script.shell("'\(try KernelRecord.vmToolPath("fenced-modeset"))' --fence-ms 1500 --hold-ms 300 --signal-on /tmp/c.full.out:modeChanged \(modes.map { "\($0)" }.joined(separator: " ")) 2>&1 | sed 's/^/@@fenced /'")
        script.shell("sleep 0.5; stop full TERM; stop k; vsyncd_stop; dump")
        let out = try await script.run(timeout: 300)
        #expect(out.result.status == 0 && out.errors.isEmpty && out.status("vsyncd") == 0, "\(out)")
        let steps = out.all("fenced")
        #expect(steps.filter { $0.hasPrefix("done ") }.count == modes.count, "fenced-modeset: \(steps)")

        let messages = out.raw("full")
        let ticks = messages.filter { $0.type == "tick" }
        // Enough of a run to mean something, by sequence: how many ticks a client in a TCG guest
        // is scheduled to take is the host's load.
        let span = Int64(ticks.last?.seq ?? 0) - Int64(ticks.first?.seq ?? 0)
        #expect(span > 300, "ticks over \(span) frames (\(ticks.count) ticks)")
        // One tick per vblank: sequences strictly increase.
        let repeated = zip(ticks, ticks.dropFirst()).filter { ($1.seq ?? 0) <= ($0.seq ?? 0) }
        #expect(repeated.isEmpty, "vblanks ticked twice or backwards: \(repeated.prefix(5).map { "\($0.0.seq ?? 0) → \($0.1.seq ?? 0)" })")
        // And with the kernel's time for that vblank.
        let kernel = KernelRecord(out.all("k"))
        let wrong = ticks.filter { t in kernel.timestamps[t.seq ?? 0].map { $0 != t.timestampNs } ?? false }
        #expect(wrong.isEmpty, "ticks whose timestamp is not the kernel's: \(wrong.prefix(5).map { "\($0.seq ?? 0) at \($0.timestampNs ?? 0)" })")

        // The race was run: in most steps vsyncd announced the new mode while the commit waited
        // on its fence, before the CRTC went off and the old events were flushed.
        let committed = steps.filter { $0.hasPrefix("committed ") }.compactMap { UInt64($0.split(separator: " ").last ?? "") }
        let signalled = steps.filter { $0.hasPrefix("signalled ") }.compactMap { UInt64($0.split(separator: " ").last ?? "") }
        let changes = messages.filter { $0.type == "event" && $0.kind == "modeChanged" }.compactMap(\.recvNs)
        let inWindow = zip(committed, signalled).filter { window in changes.contains { $0 > window.0 && $0 < window.1 } }.count
        print("mode sets: \(modes.count), announced while the commit waited on its fence: \(inWindow), ticks \(ticks.count)")
        #expect(inWindow >= modes.count / 2, "vsyncd saw the new mode inside the fence window in \(inWindow) of \(modes.count) mode sets")
    }
}
