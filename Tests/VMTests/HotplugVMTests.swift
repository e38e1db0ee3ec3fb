import Foundation
import Testing
import VsyncCore

/// Hotplug for real (issue 20, Deliver 3): a connector unplugged and plugged again, with and
/// without a DRM master on its card, and a whole vkms device disabled and enabled again, on the
/// test bed's 7.x kernel (vkms configfs, Scripts/vkms-layout.sh). vsyncd must follow what is true:
/// ticks while the CRTC runs, off or removed when it stops, back when it returns; a follower of
/// the connector waits and resumes; a client on another card sees nothing. Driven by uevents.
@Suite(.serialized)
struct HotplugVMTests {
    /// card0 (vkms's default device, fbcon's 60 Hz) and a configfs device `dock` with one
    /// display at 75 Hz (card1).
    static let layout = "vkms=60 dock=75"
    /// "Untouched" under TCG: the guest's own processes (the layout's holders starting and
    /// ending, Swift clients) stall it for a few frames now and then, whatever vsyncd does, so
    /// as MultiDisplayVMTests does: no display event, and ticks on without a gap of 500 ms. The
    /// longest gap and the vblanks skipped are printed.
    static let untouchedGapNs: UInt64 = 500_000_000

    static func events(_ out: VsyncdGuestOutput, _ name: String) -> [String] {
        out.all(name).compactMap { line in
            guard line.hasPrefix("{\"event\"") else { return nil }
            return line.split(separator: "\"").dropFirst(3).first.map(String.init)
        }
    }

    /// The first display event `kind` in client NAME's output: its line's index in `all(NAME)`
    /// and vsyncd's CLOCK_MONOTONIC stamp of it.
    static func event(_ out: VsyncdGuestOutput, _ name: String, _ kind: String) -> (line: Int, monotonicNs: UInt64)? {
        struct Event: Decodable { var event: String; var monotonicNs: UInt64 }
        for (i, line) in out.all(name).enumerated() where line.hasPrefix("{\"event\"") {
            if let e = try? JSONDecoder().decode(Event.self, from: Data(line.utf8)), e.event == kind { return (i, e.monotonicNs) }
        }
        return nil
    }

    /// Ticks between two marks, the longest gap between consecutive ones (ns), where it ended,
    /// and the vblanks they skipped (counted by sequence).
    static func gap(_ ticks: [FollowTick], from: UInt64, to: UInt64) -> (count: Int, maxGapNs: UInt64, atNs: UInt64, skipped: UInt64) {
        let inside = ticks.filter { $0.timestampNs >= from && $0.timestampNs <= to }
        var worst: (UInt64, UInt64) = (0, 0)
        var skipped: UInt64 = 0
        for (a, b) in zip(inside, inside.dropFirst()) {
            if b.timestampNs &- a.timestampNs > worst.0 { worst = (b.timestampNs &- a.timestampNs, b.timestampNs) }
            skipped += b.seq &- a.seq &- 1
        }
        return (inside.count, worst.0, worst.1, skipped)
    }

    /// Unplug and replug a connector, without a master (the kernel's fbdev client turns the
    /// CRTC off, and relights it on replug) and with one (the CRTC keeps running).
    @Test(arguments: [false, true])
    func aConnectorUnpluggedAndPluggedAgain(master: Bool) async throws {
        var script = try VsyncdGuestScript()
        script.layoutUp(Self.layout)
        if master { script.layout("master dock") }
        script.shell("vsyncd_start")
        script.shell("follow dock --display \"$CONN_dock_1\"")
        script.shell("follow other --display \"$CONN_vkms_1\"")
        script.shell("wait_ticks dock 5; wait_ticks other 5")
        script.shell("sleep 1; mark unplug")
        script.layout("unplug dock.1")
        script.shell("sleep 3; mark plug")
        script.layout("plug dock.1")
        script.shell("sleep 4; mark end")
        script.shell("stop dock; stop other; vsyncd_stop; dump")
        let out = try await script.run(timeout: 300)
        #expect(out.result.status == 0 && out.errors.isEmpty && out.status("vsyncd") == 0, "\(out)")
        let unplug = try #require(out.mark("unplug")), plug = try #require(out.mark("plug")), end = try #require(out.mark("end"))
        let dock = out.ticks("dock")
        let events = Self.events(out, "dock")
        if master {
            // A master holds the card: the kernel changes nothing, the CRTC runs, ticks go on.
            #expect(!events.contains("off") && !events.contains("removed"), "events with a master: \(events)")
            let whole = Self.gap(dock, from: unplug, to: end)
            #expect(whole.count > 300 && whole.maxGapNs < Self.untouchedGapNs, "ticks through the unplug: \(whole)")
        } else {
            // fbdev turns the unplugged CRTC off: `off`, no ticks; on replug it relights it:
            // `on`, and ticks again, at fbdev's mode, within a second of the plug step. When the
            // kernel's fbdev worker gets to the unplug is the kernel's (under TCG it once took
            // over a second): the dark spell is judged from vsyncd's own `off`, by its stamp and
            // by the order of the follower's lines.
            #expect(events.contains("off") && events.contains("on"), "events without a master: \(events)")
            #expect(!events.contains("removed"))
            let off = try #require(Self.event(out, "dock", "off")), on = try #require(Self.event(out, "dock", "on"))
            #expect(unplug < off.monotonicNs && off.monotonicNs < plug && off.line < on.line, "off at \(off), on at \(on)")
            let between = out.all("dock")[off.line..<on.line].filter { $0.hasPrefix("{\"seq\"") }
            #expect(between.isEmpty, "ticks between off and on: \(between)")
            let dark = dock.filter { $0.timestampNs > off.monotonicNs && $0.timestampNs < plug }
            #expect(dark.isEmpty, "ticks while the CRTC was off: \(dark)")
            // vsyncd says off within a second of the CRTC's last vblank.
            let last = try #require(dock.last { $0.timestampNs < off.monotonicNs }, "no tick before the off")
            #expect(off.monotonicNs - last.timestampNs < 1_000_000_000, "off \(Double(off.monotonicNs - last.timestampNs) / 1e6) ms after the last vblank")
            print("unplug without a master: off \(Double(off.monotonicNs - unplug) / 1e6) ms after the unplug step, \(Double(off.monotonicNs - last.timestampNs) / 1e6) ms after the last vblank")
            let back = try #require(dock.first { $0.timestampNs > plug }, "no tick after the replug")
            #expect(back.timestampNs - plug < 2_000_000_000, "first tick \(Double(back.timestampNs - plug) / 1e6) ms after the plug step")
        }
        #expect(out.status("dock") == 0, "dock follower: \(out.all("dock.err"))")
        // The other card's client: ticks without a gap, and no display event.
        let other = Self.gap(out.ticks("other"), from: unplug, to: end)
        print("unplug and replug \(master ? "with" : "without") a master: the other card's client had \(other.count) ticks, longest gap \(Double(other.maxGapNs) / 1e6) ms, \(other.skipped) vblanks skipped; dock's events \(events)")
        #expect(other.maxGapNs < Self.untouchedGapNs, "the other card's ticks had a gap of \(other.maxGapNs) ns")
        #expect(TickCheck.notIncreasing(out.ticks("other")).isEmpty)
        #expect(Self.events(out, "other").filter { $0 != "added" }.isEmpty, "the other card's client got \(Self.events(out, "other"))")
    }

    /// A whole card disabled and enabled again: vsyncd closes the card's fd (no fd leak), its
    /// follower waits and resumes on the returning card, the other card's client is untouched.
    @Test func aCardDisabledAndEnabledAgain() async throws {
        var script = try VsyncdGuestScript()
        script.layoutUp(Self.layout)
        script.shell("vsyncd_start")
        script.shell("follow dock --display \"$CONN_dock_1\"")
        script.shell("follow other --display \"$CONN_vkms_1\"")
        script.shell("wait_ticks dock 5; wait_ticks other 5")
        script.shell("echo \"@@fds.before $(ls /proc/$VSYNCD/fd | wc -l)\"; mark disable")
        script.layout("disable dock")
        script.shell("sleep 3; echo \"@@fds.gone $(ls /proc/$VSYNCD/fd | wc -l)\"; mark enable")
        script.layout("enable dock")
        script.shell("sleep 5; echo \"@@fds.after $(ls /proc/$VSYNCD/fd | wc -l)\"; mark end")
        script.shell("stop dock; stop other; vsyncd_stop; dump")
        let out = try await script.run(timeout: 300)
        #expect(out.result.status == 0 && out.errors.isEmpty && out.status("vsyncd") == 0, "\(out)")
        let disable = try #require(out.mark("disable")), enable = try #require(out.mark("enable")), end = try #require(out.mark("end"))
        let events = Self.events(out, "dock")
        // Removed, then waiting (protocol 3: no "gone" error), then the card's display is added back.
        #expect(events.contains("removed") && events.contains("waiting"), "dock follower's events: \(events)")
        #expect(out.status("dock") == 0 && !out.all("dock.err").contains { $0.contains("gone") }, "\(out.all("dock.err"))")
        let back = try #require(out.ticks("dock").first { $0.timestampNs > enable }, "the follower did not resume: \(events)")
        // What vsyncd owes is a prompt resume once the card's display is lit again, not the
        // enable step itself (configfs, the new node, a debug vkms-modeset starting in a TCG
        // guest): that took 2.6 to 16 s on a loaded host, main's vsyncd and the one-hop tick path
        // alike, so a bound from the enable step measured the host. The returned card is a new
        // device whose CRTC counts its vblanks from 0 when the mode set lights it: the first
        // tick's sequence is the frames that passed before the follower resumed (7 to 45 seen:
        // the rescan that finds the display runs four times a second).
        let periodNs = customModePeriodNs(75)
        let litNs = Double(back.timestampNs) - Double(back.seq) * periodNs
        print("card disabled and enabled: lit \((litNs - Double(enable)) / 1e6) ms after the enable step, first tick \(back.seq) frames later")
        #expect(Double(back.seq) * periodNs < 2e9, "the follower resumed \(back.seq) frames after the card's display was lit again")
        // The card's fd was closed while it was gone and one opened again: no leak.
        let before = Int(out.all("fds.before").first ?? ""), gone = Int(out.all("fds.gone").first ?? ""), after = Int(out.all("fds.after").first ?? "")
        #expect(gone.map { $0 < before ?? 0 } == true && after == before, "vsyncd's fds: \(String(describing: before)) → \(String(describing: gone)) → \(String(describing: after))")
        // The other card's client is untouched.
        let other = Self.gap(out.ticks("other"), from: disable, to: end)
        print("card disabled and enabled: the other card's client had \(other.count) ticks, longest gap \(Double(other.maxGapNs) / 1e6) ms ending \(Double(Int64(other.atNs) - Int64(disable)) / 1e6) ms after the disable step (enable at \(Double(enable - disable) / 1e6) ms), \(other.skipped) vblanks skipped")
        #expect(other.maxGapNs < Self.untouchedGapNs, "the other card's ticks had a gap of \(other.maxGapNs) ns")
        #expect(Self.events(out, "other").filter { $0 != "added" }.isEmpty, "the other card's client got \(Self.events(out, "other"))")
        #expect(TickCheck.notIncreasing(out.ticks("other")).isEmpty)
        #expect(!out.all("vsyncd.log").contains { $0.contains("skipping") && $0.contains("gone") }, "a card coming up was called gone")
    }

    /// Display info stays true for displays nobody follows, and selectors name a card: dock.1's
    /// mode changes from 75 to 120 Hz while no client follows it; a follower selecting it by its
    /// card's bus path (`@faux-dock`, the card's primary display) gets the new mode from its first
    /// tick, with no `modeChanged` first. A bare CRTC id the cards do not share still works.
    @Test func aDisplayNobodyFollowsIsReadAfreshAndSelectedByItsCard() async throws {
        var script = try VsyncdGuestScript()
        script.layoutUp(Self.layout)
        script.shell("vsyncd_start")
        script.shell("follow warm --display \"$CONN_dock_1\" --frames 10; wait $PID_warm")
        script.layout("mode dock.1 120")
        script.shell("sleep 1; mark changed")
        script.shell("follow card --display @faux-dock --frames 30")
        script.shell("CRTC=$(Scripts/vkms-layout.sh show | awk '$1 == \"dock.1\" { print $4 }'); follow crtc --display \"crtc:$CRTC@card1\" --frames 30")
        script.shell("wait $PID_card; echo \"@@card.status $?\"; wait $PID_crtc; echo \"@@crtc.status $?\"; vsyncd_stop; dump")
        let out = try await script.run(timeout: 300)
        #expect(out.result.status == 0 && out.errors.isEmpty && out.status("vsyncd") == 0, "\(out)")
        let exact = 1e9 / customModePeriodNs(120)
        for name in ["card", "crtc"] {
            let lines = out.all(name)
            let firstTick = lines.firstIndex { $0.hasPrefix("{\"seq\"") }
            let before = lines[..<(firstTick ?? lines.endIndex)].filter { $0.hasPrefix("{\"event\"") }
            #expect(before.isEmpty, "\(name): events before its first tick: \(before)")
            let ticks = out.ticks(name)
            #expect(ticks.count == 30 && out.status(name) == 0, "\(name): \(ticks.count) ticks, \(out.all("\(name).err"))")
            // Every tick, the first included, at 120 Hz (the model starts from the mode's period).
            let worst = ticks.map { abs(1e9 / Double($0.durationNs) - exact) }.max() ?? .infinity
            #expect(worst < 0.5, "\(name): a tick's duration says \(worst) Hz off the new mode's \(exact) Hz")
        }
    }

    /// `primary` with several displays: card0's display while it is lit (the first lit display
    /// in the kernel's order; vkms has no built-in panel), the dock's when card0's goes dark,
    /// card0's again when it is back. A follower of `primary` moves each time (`modeChanged`
    /// with the new display's record) and ticks at the new primary's rate.
    @Test func primaryFollowersMoveWhenThePrimaryGoesDarkAndComesBack() async throws {
        var script = try VsyncdGuestScript()
        script.layoutUp(Self.layout)
        script.shell("vsyncd_start")
        script.shell("follow p --display primary")
        script.shell("wait_ticks p 5; mark first")
        script.layout("mode vkms.1 off")
        script.shell("sleep 3; mark dark")
        script.layout("mode vkms.1 on")
        script.shell("sleep 4; mark end; stop p; vsyncd_stop; dump")
        let out = try await script.run(timeout: 300)
        #expect(out.result.status == 0 && out.errors.isEmpty && out.status("vsyncd") == 0, "\(out)")
        let first = try #require(out.mark("first")), dark = try #require(out.mark("dark")), end = try #require(out.mark("end"))
        let events = Self.events(out, "p")
        #expect(events.filter { $0 == "modeChanged" }.count >= 2, "p's events: \(events)")
        let ticks = out.ticks("p")
        func hz(_ t: FollowTick) -> Double { 1e9 / Double(t.durationNs) }
        let onCard0 = ticks.filter { $0.timestampNs < first }
        let onDock = ticks.filter { $0.timestampNs > dark - 1_500_000_000 && $0.timestampNs < dark }
        let back = ticks.filter { $0.timestampNs > end - 1_500_000_000 && $0.timestampNs < end }
        let dockHz = 1e9 / customModePeriodNs(75)
        print("primary follower: \(onCard0.count) ticks at \(onCard0.last.map(hz) ?? 0) Hz, then \(onDock.count) at \(onDock.last.map(hz) ?? 0) Hz, then \(back.count) at \(back.last.map(hz) ?? 0) Hz; events \(events)")
        #expect(onCard0.allSatisfy { abs(hz($0) - 60) < 0.1 } && !onCard0.isEmpty)
        #expect(onDock.count > 30 && onDock.allSatisfy { abs(hz($0) - dockHz) < 0.01 }, "on the dock while card0 was dark")
        #expect(back.count > 30 && back.allSatisfy { abs(hz($0) - 60) < 0.1 }, "back on card0")
    }
}
