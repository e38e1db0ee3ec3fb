import Foundation
import Testing
import VsyncCore

/// Several displays at once, each exact: three displays on two cards (vkms's default
/// card0 and a configfs device built by Tests/TestBed/vkms-layout.sh), at three different exact rates
/// the test chooses (VSYNCD_TEST_RATES overrides them: nothing here depends on the values). The
/// truth is the kernel's own record of each CRTC (kernel-vblank-recorder --watch), matched by
/// card, CRTC and sequence. Needs Linux 6.19+ (vkms configfs): the test bed's 7.x kernel.
@Suite(.serialized)
struct MultiDisplayVMTests {
    /// Rates of vkms.1 (card0), dock.1 and dock.2 (card1), and dock.1's rate after its mode change.
    static let rates = testRates([59.94, 75.3, 143.86])
    static let changedRate = testRates([100.7], variable: "VSYNCD_TEST_RATE_CHANGE")[0]
    static let layout = "vkms=\(rates[0]) dock=\(rates[1]),\(rates[2])"
    static let displayNames = ["vkms.1", "dock.1", "dock.2"]

    /// The exact refresh of the custom mode vkms-modeset sets for `hz`.
    static func exactHz(_ hz: Double) -> Double { 1e9 / customModePeriodNs(hz) }

    static func events(_ out: VsyncdGuestOutput, _ name: String) -> [String] {
        out.all(name).filter { $0.hasPrefix("{\"event\"") }
    }

    // MARK: list and measure --all

    struct MeasureAll: Decodable {
        struct Report: Decodable {
            var device: String
            var crtcId: UInt32
            var connector: String?
            var frames: Int
            var missed: UInt64
            var nominalHz: Double
            var measuredHz: Double
            var ppm: Double
        }
        var crtcs: [Report]
    }

    @Test func listAndMeasureAllSeeEveryDisplayOnEveryCard() async throws {
        var script = try VsyncdGuestScript()
        script.layoutUp(Self.layout)
        script.listDisplays()
        script.shell("\"$VSYNC_BIN/vsync-probe\" measure --all --frames 120 --json 2>/tmp/m.err | tr -d '\\n' | sed 's/^/@@measure /'; echo; sed 's/^/@@measure.err /' /tmp/m.err")
        let out = try await script.run(timeout: 300)
        #expect(out.result.status == 0 && out.errors.isEmpty, "\(out)")
        let layout = VkmsLayout(out.all("layout"))
        try #require(layout.displays.count == 3, "vkms-layout show: \(out.all("layout")) \(out.all("layout.log"))")
        #expect(Set(layout.displays.map(\.card)).count == 2, "three displays on two cards: \(layout.displays.map(\.card))")

        let listing = try JSONDecoder().decode(ProbeListing.self, from: Data((out.all("list").first ?? "").utf8))
        let measured = try JSONDecoder().decode(MeasureAll.self, from: Data((out.all("measure").first ?? "").utf8))
        #expect(measured.crtcs.count == 3, "measure --all: \(measured.crtcs.map { "\($0.device) CRTC \($0.crtcId)" }) \(out.all("measure.err"))")
        for (name, hz) in zip(Self.displayNames, Self.rates) {
            let display = try #require(layout[name], "no \(name) in the layout")
            let exact = Self.exactHz(hz)
            // vsync-probe list: the display's card, connector and lit CRTC at the exact rate.
            let card = try #require(listing.cards.first { $0.path == display.card }, "list has no \(display.card): \(listing.cards.map(\.path))")
            let connector = card.connectors.first { $0.name == display.connector }
            #expect(connector?.status == "connected" && connector?.crtcId == display.crtc, "\(name): list says \(String(describing: connector))")
            let crtc = card.crtcs.first { $0.id == display.crtc }
            #expect(crtc?.active == true && crtc?.vblank == true, "\(name): \(String(describing: crtc))")
            #expect(abs(ppm(crtc?.nominalHz ?? 0, against: exact)) < 0.001, "\(name): list nominal \(crtc?.nominalHz ?? 0) Hz, mode \(exact) Hz")
            // measure --all: the same CRTC, measured within 1 ppm of its mode, all 120 frames.
            let report = try #require(measured.crtcs.first { $0.device == display.card && $0.crtcId == display.crtc }, "measure --all has no \(name)")
            #expect(report.connector == display.connector && report.frames == 120)
            #expect(abs(ppm(report.nominalHz, against: exact)) < 0.001, "\(name): nominal \(report.nominalHz) Hz, mode \(exact) Hz")
            #expect(abs(report.ppm) <= 1, "\(name): measured \(report.measuredHz) Hz, \(report.ppm) ppm off \(report.nominalHz) Hz")
            print("\(name) \(display.card) \(display.connector) CRTC \(display.crtc): mode \(sixDecimals(exact)) Hz, measured \(sixDecimals(report.measuredHz)) Hz (\(String(format: "%+.3f", report.ppm)) ppm), missed \(report.missed)")
        }
    }

    // MARK: Followers on each display; a mode change and an off on one

    @Test func eachDisplayExactAndUntouchedByAnothersModeChangeAndOff() async throws {
        var script = try VsyncdGuestScript(release: true)
        script.layoutUp(Self.layout)
        script.shell("vsyncd_start")
        try script.recordKernelOnLayout("k")
        // Divisors 1, 2 and 3: full rate on card0, half on dock.1, a third on dock.2.
        let fps = [0, Int((Self.rates[1] / 2).rounded()), Int((Self.rates[2] / 3).rounded())]
        let clients = ["a", "b", "c"]
        for (i, name) in clients.enumerated() {
            let device = Self.displayNames[i].split(separator: ".")
            script.shell("follow \(name) --display \"$CONN_\(device[0])_\(device[1])\" --fps \(fps[i])")
        }
        for name in clients { script.shell("wait_ticks \(name) 5") }
        script.shell("sleep 1; mark start; sleep 5; mark steady")
        // dock.1 (client b) changes mode, then goes off; a and c must not notice.
        script.layout("mode dock.1 \(Self.changedRate)")
        script.shell("sleep 4; mark changed")
        script.layout("mode dock.1 off")
        script.shell("sleep 3; mark end")
        // dock.1 back on (its preferred mode): b ticks again. (A follower of a dark display does
        // not end on SIGINT until a message comes: the signal may land on another thread.)
        script.shell("n=$(wc -l </tmp/c.b.out)")
        script.layout("mode dock.1 on")
        script.shell("wait_ticks b $((n + 4))")
        for name in clients { script.shell("stop \(name)") }
        script.shell("stop k; vsyncd_stop; dump")
        let out = try await script.run(timeout: 300)
        #expect(out.result.status == 0 && out.errors.isEmpty && out.status("vsyncd") == 0, "\(out)")

        let layout = VkmsLayout(out.all("layout"))
        try #require(layout.displays.count == 3, "vkms-layout show: \(out.all("layout")) \(out.all("layout.log"))")
        let records = KernelRecord.byCRTC(out.all("k"))
        let start = try #require(out.mark("start")), steady = try #require(out.mark("steady"))
        let changed = try #require(out.mark("changed")), end = try #require(out.mark("end"))

        for (i, name) in clients.enumerated() {
            let display = try #require(layout[Self.displayNames[i]])
            let exact = Self.exactHz(Self.rates[i])
            let kernel = try #require(records[display.kernelCRTC], "no kernel record of \(display.kernelCRTC): \(out.all("k.err"))")
            let ticks = out.ticks(name)
            let truth = VBlankTruth(kernel: kernel, clients: [ticks])
            #expect(truth.conflicts.isEmpty, "\(name): ticks whose timestamp is not \(display.kernelCRTC)'s: \(truth.conflicts.prefix(5))")
            let segment = try #require(truth.segment(containing: start + (steady - start) / 2), "\(name): no progression in \(display.kernelCRTC)'s record")
            // The kernel's record of this CRTC is its mode, exactly; the daemon's model is the record.
            #expect(abs(ppm(1e9 / segment.periodNs, against: exact)) <= 1, "\(display.kernelCRTC): kernel \(1e9 / segment.periodNs) Hz, mode \(exact) Hz")
            let steadyTicks = ticks.filter { $0.timestampNs >= start && $0.timestampNs <= steady }
            let modelErrors = steadyTicks.map { ppm(1e9 / Double($0.durationNs), against: 1e9 / segment.periodNs) }
            let worst = modelErrors.map(abs).max() ?? .infinity
            #expect(worst <= 1, "\(name) on \(display.connector): the model's period is up to \(worst) ppm off \(display.kernelCRTC)'s record")
            let divisor = UInt64(RateMapping.divisor(preferredFramesPerSecond: fps[i], refreshHz: exact))
            #expect(divisor == UInt64(i + 1), "fps \(fps[i]) at \(exact) Hz maps to divisor \(divisor)")
            // Untouched clients (a, c): one progression, every tick accounted for, from start to
            // end across dock.1's mode change and off; no display event after their first tick.
            let to = i == 1 ? steady : end
            if i != 1 {
                #expect(segment.lastNs >= end, "\(display.kernelCRTC)'s progression broke at \(segment.lastNs), before the end \(end)")
            }
            let report = TickCheck.check(name, ticks, divisor: divisor, segment: segment, truth: truth, from: start, to: to)
            print("\(name) \(display.name) \(display.connector) (\(sixDecimals(exact)) Hz): model within \(String(format: "%.3f", worst)) ppm; " + report.summary)
            #expect(report.failures.isEmpty, "\(report.failures.joined(separator: "\n"))")
            #expect(TickCheck.notIncreasing(ticks).isEmpty, "\(name): \(TickCheck.notIncreasing(ticks).prefix(5))")
            #expect(out.status(name) == 0, "\(name) exited \(String(describing: out.status(name))): \(out.all("\(name).err"))")
            if i != 1 {
                let firstTick = out.all(name).firstIndex { $0.hasPrefix("{\"seq\"") } ?? 0
                let late = out.all(name)[firstTick...].filter { $0.hasPrefix("{\"event\"") }
                #expect(late.isEmpty, "\(name) got display events while another display changed: \(late)")
                // No spell of 500 ms in which this CRTC's vblanks went unticked, counted as
                // TickCheck.longestUntickedSpell does: not the kernel's own pauses, nor the time
                // the guest held up every process (the recorder too).
                let window = ticks.filter { $0.timestampNs >= steady && $0.timestampNs <= end }
                let spell = TickCheck.longestUntickedSpell(ticks, kernel: kernel, from: steady, to: end)
                #expect(spell.ns < 500_000_000, "\(name): no tick for \(spell) of \(display.kernelCRTC) as dock.1 changed")
                print("  \(name) while dock.1 changed and went off: \(window.count) ticks, longest spell without a tick \(spell), skipped \(window.map(\.skipped).reduce(0, +))")
            }
        }

        // b followed dock.1 across its mode change (the new rate, its own new divisor) and off.
        let display = try #require(layout["dock.1"])
        let kernel = try #require(records[display.kernelCRTC])
        let ticks = out.ticks("b")
        let truth = VBlankTruth(kernel: kernel, clients: [ticks])
        let newExact = Self.exactHz(Self.changedRate)
        let newSegment = try #require(truth.segments.first { $0.firstNs > steady && abs(ppm(1e9 / $0.periodNs, against: newExact)) <= 1 },
                                      "no \(newExact) Hz progression in \(display.kernelCRTC)'s record after the mode change: \(truth.segments.map { 1e9 / $0.periodNs })")
        let events = Self.events(out, "b")
        #expect(events.contains { $0.contains("modeChanged") }, "b: no modeChanged event: \(events)")
        #expect(events.contains { $0.contains("\"off\"") }, "b: no off event: \(events)")
        let newDivisor = UInt64(RateMapping.divisor(preferredFramesPerSecond: fps[1], refreshHz: newExact))
        let settle = newSegment.firstNs + UInt64(3 * newSegment.periodNs * Double(newDivisor))
        let report = TickCheck.check("b", ticks, divisor: newDivisor, segment: newSegment, truth: truth, from: settle, to: min(changed, newSegment.lastNs))
        print("b after dock.1's change to \(sixDecimals(newExact)) Hz: " + report.summary + "; events \(events)")
        #expect(report.failures.isEmpty, "\(report.failures.joined(separator: "\n"))")
        // Off: no tick between the new mode's last vblank and the first after `on`.
        let back = truth.segments.first { $0.firstNs > newSegment.lastNs }
        let inOff = ticks.filter { $0.timestampNs > newSegment.lastNs && $0.timestampNs < (back?.firstNs ?? .max) }
        #expect(inOff.isEmpty, "b got \(inOff.count) ticks while dock.1 was off: \(inOff.prefix(3).map(\.seq))")
        #expect(newSegment.lastNs < end && (back?.firstNs ?? 0) > end, "dock.1 was not off from its off step to the end mark")
        #expect(events.contains { $0.contains("\"on\"") }, "b: no on event after dock.1 came back: \(events)")
    }
}
