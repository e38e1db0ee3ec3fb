import Foundation
import Testing

/// In the VM test bed, `vsync-probe measure` tells interrupt-time stamps from
/// scanout ones. Booted with `drm.timestamp_precision_usec=0` the kernel stamps vkms's vblanks
/// at interrupt time: late by the guest's timer latency, 40–60 µs RMS on an idle host and up
/// to ~1 ms on a busy one, not always with a late tail (`RefreshModel.interruptOnlySpreadNs`).
/// On a normal boot they are vkms's exact grid. Boots with vm-run.sh --host-tsc (without it a
/// busy host leaves the guest on jiffies: every stamp a 4 ms host tick).
@Suite(.serialized)
struct TimestampSourceVMTests {
    struct Quality: Decodable {
        struct Residual: Decodable { var rms: Double; var p99: Double }
        var timestampSource: String
        var residualUs: Residual
        var ppm: Double
        var frames: Int
        var nominalHz: Double
        struct Realtime: Decodable { var vblankNs: UInt64; var driftPpm: Double; var realtimeVsMonotonicPpm: Double }
        var realtime: Realtime?
    }

    static func measure(append: String?) async throws -> [Quality] {
        var script = try ProbeScript()
        for (i, frames) in [240, 600].enumerated() { script.probe("m\(i)", "measure --json --frames \(frames)") }
        // High-resolution timers whatever the host's load (vm-run.sh --host-tsc): without them
        // every interrupt stamp is a 4 ms host tick, and no fit can promise the rates below.
        let result = try await GuestVM.run(script.command, timeout: 400, append: append, hostTSC: true)
        let out = ProbeOutput(result: result)
        return try (0..<2).map { i in
            #expect(out.status("m\(i)") == 0, "\(out)")
            return try JSONDecoder().decode(Quality.self, from: Data((out.line("m\(i)") ?? "").utf8))
        }
    }

    @Test func interruptStampsAreFlagged() async throws {
        let runs = try await Self.measure(append: "drm.timestamp_precision_usec=0")
        for q in runs {
            print("drm.timestamp_precision_usec=0, \(q.frames) frames: \(q.timestampSource), residual RMS \(q.residualUs.rms) µs, p99 \(q.residualUs.p99) µs, \(q.ppm) ppm")
            #expect(q.timestampSource == "interrupt", "\(q)")
            // No interrupt verdict comes below 10 µs RMS; vkms's exact stamps have 0.
            #expect(q.residualUs.rms >= 10, "\(q)")
            // The targets set for it are 20 ppm over 240 frames and 5 over 600 (measured here:
            // 3-9 and 3.5-4.4 on a loaded host); a test on a shared 2-core machine holds twice them.
            // No fit can know the rate better than the stamps' lateness over the run's span: when
            // the host's load moves the guest's latency floor mid-run (one CI run: p99 171 µs,
            // -43 ppm over 240 frames, a 172 µs tilt), the bound is the tilt that lateness allows.
            let spanSeconds = Double(q.frames) / q.nominalHz
            let noiseBoundPpm = 1.5 * q.residualUs.p99 / spanSeconds
            #expect(abs(q.ppm) <= max(q.frames >= 600 ? 10 : 40, noiseBoundPpm), "\(q)")
        }
    }

    @Test func scanoutStampsStayScanout() async throws {
        let runs = try await Self.measure(append: nil)
        for q in runs {
            print("normal boot, \(q.frames) frames: \(q.timestampSource), residual RMS \(q.residualUs.rms) µs, p99 \(q.residualUs.p99) µs, \(q.ppm) ppm")
            #expect(q.timestampSource == "scanout", "\(q)")
            // vkms stamps the exact grid (to the ns): nothing changes on it.
            #expect(q.residualUs.p99 < 1 && abs(q.ppm) < 0.01, "\(q)")
            // The grid on CLOCK_REALTIME. The guest runs no NTP, so its wall
            // clock keeps CLOCK_MONOTONIC's rate and the drift is the rate's own error; the
            // vblank's wall time is in this century.
            let realtime = try #require(q.realtime, "measure --json printed no realtime")
            #expect(abs(realtime.realtimeVsMonotonicPpm) < 1 && abs(realtime.driftPpm - q.ppm) < 1, "\(realtime)")
            #expect(realtime.vblankNs > 1_600_000_000_000_000_000, "\(realtime)")
        }
    }
}
