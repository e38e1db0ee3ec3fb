import Foundation
import Testing
import VsyncCore

/// vsyncd on vkms in the VM test bed: three `vsync-probe follow`
/// clients at the full rate, half and a third, checked against the kernel's vblank timeline.
/// Each test is one guest boot.
@Suite(.serialized)
struct VsyncdVMTests {
    /// Clients at full, half and a third of `hz`, as whole frames per second (0 = maximum).
    static func rates(_ hz: Double) -> [(name: String, fps: Int)] {
        [("full", 0), ("half", Int((hz / 2).rounded())), ("third", Int((hz / 3).rounded()))]
    }

    @Test func threeRatesOnDefault75And144HzModes() async throws {
        var script = try VsyncdGuestScript()
        script.listDisplays()
        script.shell("vsyncd_start")
        try script.recordKernel("k")
        // Mode 0 is fbcon's default; the others are held by vkms-modeset while their clients run.
        let modes: [Double?] = [nil, 75, 144]
        for (index, hz) in modes.enumerated() {
            if let hz { script.shell("hold \(hz)") }
            let nominal = hz ?? 60
            for client in Self.rates(nominal) {
                script.shell("follow m\(index)\(client.name) --fps \(client.fps)")
            }
            // Measure once every client ticks: a Swift process starting in a TCG guest stalls it.
            for client in Self.rates(nominal) { script.shell("wait_ticks m\(index)\(client.name) 5") }
            script.shell("sleep 1; mark start\(index); sleep 4; mark end\(index)")
            for client in Self.rates(nominal) { script.shell("stop m\(index)\(client.name)") }
            if hz != nil { script.shell("release") }
        }
        script.shell("stop k; vsyncd_stop; dump")
        let out = try await script.run(timeout: 400)
        #expect(out.result.status == 0 && out.errors.isEmpty && out.status("vsyncd") == 0, "\(out)")
        #expect(out.vblankMethod == "crtc-sequence", "vsyncd's vblank method on vkms: \(out.vblankMethod ?? "not logged")")
        let kernel = KernelRecord(out.all("k"))
        #expect(kernel.ordered.count > 500, "kernel recorder: \(out.all("k.err"))")

        let defaultHz = try out.defaultRefreshHz()
        for (index, hz) in modes.enumerated() {
            let exactHz = hz.map { 1e9 / customModePeriodNs($0) } ?? defaultHz
            let clients = Self.rates(hz ?? 60)
            let full = out.ticks("m\(index)full")
            // The truth is the kernel's own record, matched by sequence: every tick's timestamp is
            // the kernel's, and the progression (period, residuals) is the kernel's, not vsyncd's.
            let truth = VBlankTruth(kernel: kernel, clients: [full] + clients.dropFirst().map { out.ticks("m\(index)\($0.name)") })
            #expect(truth.conflicts.isEmpty, "ticks whose timestamp is not the kernel's: \(truth.conflicts.prefix(5))")
            let start = try #require(out.mark("start\(index)")), end = try #require(out.mark("end\(index)"))
            let segment = try #require(truth.segment(containing: start + (end - start) / 2), "no vblank progression at \(exactHz) Hz: \(out)")
            // The kernel's progression is the mode's exact period (vkms rounds it to whole ns).
            #expect(abs(segment.periodNs - 1e9 / exactHz) <= 1, "kernel period \(segment.periodNs) ns at \(exactHz) Hz")
            #expect(segment.maxResidualNs <= TickCheck.progressionToleranceNs, "vkms timestamps not periodic: \(segment.maxResidualNs) ns")
            print("mode \(sixDecimals(exactHz)) Hz: kernel period \(String(format: "%.1f", segment.periodNs)) ns, max residual \(String(format: "%.1f", segment.maxResidualNs)) ns")
            for client in clients {
                let name = "m\(index)\(client.name)"
                let divisor = UInt64(RateMapping.divisor(preferredFramesPerSecond: client.fps, refreshHz: exactHz))
                #expect(divisor == [1, 2, 3][clients.firstIndex { $0.name == client.name }!], "fps \(client.fps) at \(exactHz) Hz maps to divisor \(divisor)")
                let report = TickCheck.check(
                    name, out.ticks(name), divisor: divisor, segment: segment, truth: truth, from: start, to: end)
                print("  " + report.summary)
                #expect(report.failures.isEmpty, "\(report.failures.joined(separator: "\n"))")
                #expect(TickCheck.notIncreasing(out.ticks(name)).isEmpty, "\(name): \(TickCheck.notIncreasing(out.ticks(name)).prefix(5))")
                #expect(out.status(name) == 0, "\(name) exited \(String(describing: out.status(name))): \(out.all("\(name).err"))")
            }
        }
    }

    /// A mode change mid-run (60 → 144 Hz): `duration`, divisors and intervals follow within 3
    /// frames of the first vblank at the new rate. The mode stays when vkms-modeset exits: fbcon
    /// restores its own only on the card's last close, and vsyncd keeps the card open.
    @Test func modeChangeMidRunFollowedWithin120ms() async throws {
        var script = try VsyncdGuestScript()
        script.listDisplays()
        script.shell("vsyncd_start")
        try script.recordKernel("k")
        let clients: [(name: String, fps: Int)] = [("full", 0), ("half", 30), ("third", 20)]
        for client in clients { script.shell("follow \(client.name) --fps \(client.fps)") }
        for client in clients { script.shell("wait_ticks \(client.name) 5") }
        script.shell("sleep 1; mark steady; sleep 3")
        script.shell("modeset --hold 4 144")
        script.shell("sleep 3; mark end")
        for client in clients { script.shell("stop \(client.name)") }
        script.shell("stop k; vsyncd_stop; dump")
        let out = try await script.run()
        #expect(out.result.status == 0 && out.errors.isEmpty && out.status("vsyncd") == 0, "\(out)")

        let defaultHz = try out.defaultRefreshHz()
        let steady = try #require(out.mark("steady")), end = try #require(out.mark("end"))
        let report = try ModeChangeCheck.run(
            out, clients: clients, expectedHz: [defaultHz, 1e9 / customModePeriodNs(144)], from: steady, to: end,
            kernel: KernelRecord(out.all("k")))
        #expect(report.failures.isEmpty, "\(report.failures.joined(separator: "\n"))")
    }
}

/// The checks shared by the mode-change tests (plain and under faults): the kernel's timeline splits
/// into one segment per mode, and in each one every client ticks right from 3 frames after the
/// first vblank at the new rate.
enum ModeChangeCheck {
    struct Report { var failures: [String] = [] }

    /// `kernel`: the kernel's own record of the run, the truth every tick is matched against.
    static func run(
        _ out: VsyncdGuestOutput, clients: [(name: String, fps: Int)], expectedHz: [Double], from: UInt64, to: UInt64,
        kernel: KernelRecord
    ) throws -> Report {
        var report = Report()
        let truth = VBlankTruth(kernel: kernel, clients: clients.map { out.ticks($0.name) })
        report.failures += truth.conflicts.prefix(5).map { "not the kernel's: \($0)" }
        let segments = truth.segments.filter { $0.lastNs >= from && $0.firstNs <= to }
        guard segments.count == expectedHz.count else {
            report.failures.append("expected \(expectedHz.count) modes in the run, the kernel's timeline has \(segments.count): "
                + segments.map { "\(String(format: "%.3f", 1e9 / $0.periodNs)) Hz seq \($0.firstSequence)...\($0.lastSequence)" }.joined(separator: ", ")
                + "; " + kernel.tail(after: segments.last?.lastNs ?? from))
            return report
        }
        // Whether the daemon read the coming mode before its first vblank (see `TickCheck.check`).
        var readEarly = false
        for (index, (segment, hz)) in zip(segments, expectedHz).enumerated() {
            if abs(segment.periodNs - 1e9 / hz) > 1 {
                report.failures.append("mode \(index): kernel period \(segment.periodNs) ns, expected \(1e9 / hz) ns")
            }
            // The first segment starts before the window; the others at their first vblank.
            // A mode set's own moments are not held to the new mode: from its first vblank until
            // the daemon has re-read the CRTC (3 frames, or `TickCheck.modeSetRecoveryNs` on a
            // kernel that relights within 20 ms under TCG), and the last moments of the old mode,
            // when the new mode may already be readable.
            // A mode read before its vblanks costs two recoveries: the kernel's mode against the
            // old grid's vblanks, then the new grid's vblanks against the model of the old.
            let recovery = TickCheck.modeSetRecoveryNs * (readEarly ? 2 : 1)
            let settle = index == 0 ? from : segment.firstNs + max(UInt64(3 * segment.periodNs), recovery)
            readEarly = false
            let next = index + 1 < segments.count ? segments[index + 1].firstNs : UInt64.max
            let windowEnd = min(segment.lastNs, to, next &- min(next, TickCheck.modeSetRecoveryNs))
            print("mode \(index): \(sixDecimals(1e9 / segment.periodNs)) Hz from seq \(segment.firstSequence) (t \(segment.firstNs))")
            for client in clients {
                let ticks = out.ticks(client.name)
                let divisor = UInt64(RateMapping.divisor(preferredFramesPerSecond: client.fps, refreshHz: hz))
                let check = TickCheck.check(
                    client.name, ticks, divisor: divisor, segment: segment, truth: truth, from: settle, to: windowEnd,
                    minimumTicks: 5, nextPeriodNs: index + 1 < segments.count ? segments[index + 1].periodNs : nil,
                    nextDivisor: index + 1 < expectedHz.count
                        ? UInt64(RateMapping.divisor(preferredFramesPerSecond: client.fps, refreshHz: expectedHz[index + 1])) : nil)
                print("  " + check.summary)
                if check.nextModeFromSequence != nil { readEarly = true }
                report.failures += check.failures.map { "mode \(index) (\(String(format: "%.3f", hz)) Hz): \($0)" }
                if index > 0 {
                    // How soon the client had the new duration: frames from the first vblank at the new rate.
                    if let first = ticks.first(where: { $0.timestampNs >= segment.firstNs && abs(Double($0.durationNs) - segment.periodNs) <= TickCheck.durationToleranceNs }) {
                        let frames = (Double(first.timestampNs) - Double(segment.firstNs)) / segment.periodNs
                        print("    \(client.name): first tick with the new duration \(String(format: "%.0f", frames)) frames after the new mode's first vblank")
                    }
                }
            }
        }
        for client in clients {
            let bad = TickCheck.notIncreasing(out.ticks(client.name))
            if !bad.isEmpty { report.failures.append("\(client.name) got sequences twice or backwards: \(bad.prefix(5))") }
            if out.status(client.name) != 0 { report.failures.append("\(client.name) exited \(String(describing: out.status(client.name)))") }
        }
        return report
    }
}
