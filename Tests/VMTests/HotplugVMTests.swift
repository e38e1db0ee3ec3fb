import Foundation
import Testing
import VsyncCore

/// Hotplug for real: a connector unplugged and plugged again, with and
/// without a DRM master on its card, and a whole vkms device disabled and enabled again, on the
/// test bed's 7.x kernel (vkms configfs, Tests/TestBed/vkms-layout.sh). vsyncd must follow what is true:
/// ticks while the CRTC runs, off or removed when it stops, back when it returns; a follower of
/// the connector waits and resumes; a client on another card sees nothing. Driven by uevents.
@Suite(.serialized)
struct HotplugVMTests {
    /// card0 (vkms's default device, fbcon's 60 Hz) and a configfs device `dock` with one
    /// display at 75 Hz (card1).
    static let layout = "vkms=60 dock=75"
    /// "Untouched", as MultiDisplayVMTests has it: no display event, and no spell worth 500 ms
    /// of vblanks the kernel gave that the client did not get (TickCheck.longestUntickedSpell:
    /// by sequence, less the time the guest held every process up). The longest is printed.
    static let untouchedGapNs: UInt64 = 500_000_000

    /// The release build of vsyncd and vsync-probe, booted with the host's TSC rate (vm-run.sh
    /// --host-tsc). These tests time vsyncd's reactions and its clients' ticks: a debug build's
    /// own cost per tick, several times the release build's, starves its clients in a TCG guest
    /// on a loaded host; and a guest left to calibrate its TSC there fails, and keeps its clock
    /// by the timer ticks it is given rather than the host's time.
    static func script() throws -> VsyncdGuestScript {
        var script = try VsyncdGuestScript(release: true)
        script.hostTSC = true
        return script
    }

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

    /// How soon after the kernel's first vblank of a display that came back its follower ticks
    /// again. While a display is off with subscribers vsyncd re-reads its CRTC every 500 ms (on
    /// its 250 ms housekeeping turn), so the first tick is due within 0.75 s and a frame; the
    /// rest is TCG's scheduling of the guest's processes.
    static let resumeBoundNs: UInt64 = 1_500_000_000

    /// A delay the daemon and its client own: `from` (a vblank) to `to` (a client's receipt),
    /// less the time the guest kept even the recorder from reading vblanks meanwhile
    /// (`KernelRecord.readerHeldUpNs`, the largest over the CRTCs it recorded).
    struct Delay: CustomStringConvertible {
        var ns: UInt64
        var totalNs: UInt64
        var guestHeldNs: UInt64
        var description: String {
            String(format: "%.1f ms (%.1f ms in all, %.1f ms of it the guest holding up every reader)", Double(ns) / 1e6, Double(totalNs) / 1e6, Double(guestHeldNs) / 1e6)
        }
    }

    static func delay(from: UInt64, to: UInt64, records: [KernelRecord]) -> Delay {
        let total = to > from ? to - from : 0
        let held = min(records.map { $0.readerHeldUpNs(from: from, to: to) }.max() ?? 0, total)
        return Delay(ns: total - held, totalNs: total, guestHeldNs: held)
    }

    /// The kernel's record of one display of the layout (kernel-vblank-recorder --watch).
    static func record(_ out: VsyncdGuestOutput, _ display: String) throws -> (display: VkmsLayout.Display, kernel: KernelRecord) {
        let layout = VkmsLayout(out.all("layout"))
        let d = try #require(layout[display], "no \(display) in the layout: \(out.all("layout")) \(out.all("layout.log"))")
        let kernel = try #require(KernelRecord.byCRTC(out.all("k"))[d.kernelCRTC], "no kernel record of \(d.kernelCRTC): \(out.all("k.err"))")
        return (d, kernel)
    }

    /// A client that must be untouched: ticks on every vblank the kernel had in `from...to` but
    /// for spells under `untouchedGapNs`, and no display event. Prints the longest spell.
    static func expectUntouched(_ out: VsyncdGuestOutput, _ name: String, display: String, from: UInt64, to: UInt64, _ what: String) throws {
        let kernel = try record(out, display).kernel
        #expect(TickCheck.record(kernel, covers: from, to), "\(name): the kernel's record of \(display) does not cover the window")
        let ticks = out.ticks(name)
        let spell = TickCheck.longestUntickedSpell(ticks, kernel: kernel, from: from, to: to)
        let kernelPause = kernel.gaps(longerThan: 0).filter { $0.after.timestampNs >= from && $0.before.timestampNs <= to }
            .map { $0.after.timestampNs - $0.before.timestampNs }.max() ?? 0
        print("\(what): \(name)'s longest spell without a tick while the kernel had vblanks \(spell), \(Double(Int64(spell.startNs) - Int64(from)) / 1e6) ms into the window; the kernel's own longest pause \(Double(kernelPause) / 1e6) ms")
        #expect(spell.ns < Self.untouchedGapNs, "\(name): no tick for \(spell); vsyncd's log: \(out.log.suffix(30))")
        #expect(TickCheck.notIncreasing(ticks).isEmpty)
        #expect(Self.events(out, name).filter { $0 != "added" }.isEmpty, "\(name) got \(Self.events(out, name))")
    }

    /// Unplug and replug a connector, without a master (the kernel's fbdev client turns the
    /// CRTC off, and relights it on replug) and with one (the CRTC keeps running).
    @Test(arguments: [false, true])
    func aConnectorUnpluggedAndPluggedAgain(master: Bool) async throws {
        var script = try Self.script()
        script.layoutUp(Self.layout)
        if master { script.layout("master dock") }
        script.shell("vsyncd_start")
        try script.recordKernelOnLayout("k")
        script.shell("follow dock --display \"$CONN_dock_1\"")
        script.shell("follow other --display \"$CONN_vkms_1\"")
        script.shell("wait_ticks dock 5; wait_ticks other 5")
        script.shell("sleep 1; mark unplug")
        script.layout("unplug dock.1")
        // Without a master the kernel's fbdev client turns the CRTC off when its worker gets to
        // it (1.7 s once, under TCG on a loaded host): the script waits for the kernel, not a
        // guessed time, then leaves the display dark (or, with a master, ticking) for 2 s.
        if !master { script.shell("wait_connector \"$CONN_dock_1\" disabled") }
        script.shell("sleep 2; mark plug")
        script.layout("plug dock.1")
        if !master { script.shell("wait_connector \"$CONN_dock_1\" enabled") }
        // Until the follower has ticked a second more (a follower that never resumes ends the
        // wait after 30 s with an error line).
        script.shell("n=$(wc -l </tmp/c.dock.out); wait_ticks dock $((n + 60)); mark end")
        script.shell("stop dock; stop other; stop k; vsyncd_stop; dump")
        let out = try await script.run(timeout: 300)
        #expect(out.result.status == 0 && out.errors.isEmpty && out.status("vsyncd") == 0, "\(out)")
        let unplug = try #require(out.mark("unplug")), plug = try #require(out.mark("plug")), end = try #require(out.mark("end"))
        print("unplug and replug \(master ? "with" : "without") a master: window \(Double(end - unplug) / 1e6) ms; guest clock \(out.clock)")
        let dock = out.ticks("dock")
        let events = Self.events(out, "dock")
        let kernel = try Self.record(out, "dock.1").kernel
        let truth = VBlankTruth(kernel: kernel, clients: [dock])
        #expect(truth.conflicts.isEmpty, "dock ticks whose timestamp is not the kernel's: \(truth.conflicts.prefix(5))")
        if master {
            // A master holds the card: the kernel changes nothing, the CRTC runs, ticks go on.
            #expect(!events.contains("off") && !events.contains("removed"), "events with a master: \(events)")
            try Self.expectUntouched(out, "dock", display: "dock.1", from: unplug, to: end, "unplug and replug with a master")
        } else {
            // fbdev turns the unplugged CRTC off and relights it on replug, each when its worker
            // gets to it: the kernel's record has the dark spell, from the CRTC's last vblank to
            // its first one back. vsyncd is judged from those: its `off` soon after the last
            // vblank, no tick inside, and the follower's first tick soon after the first.
            #expect(events.contains("off") && events.contains("on"), "events without a master: \(events)")
            #expect(!events.contains("removed"))
            let dark = try #require(kernel.gaps(longerThan: 1_000_000_000).first { $0.before.timestampNs < plug && $0.after.timestampNs > plug },
                                    "no dark spell across the plug step in the kernel's record: \(kernel.gaps(longerThan: 100_000_000).map { ($0.before, $0.after) })")
            print("unplug without a master: the kernel's last vblank \(Double(Int64(dark.before.timestampNs) - Int64(unplug)) / 1e6) ms after the unplug step, its first vblank back \(Double(Int64(dark.after.timestampNs) - Int64(plug)) / 1e6) ms after the plug step")
            let off = try #require(Self.event(out, "dock", "off")), on = try #require(Self.event(out, "dock", "on"))
            #expect(off.line < on.line, "off at \(off), on at \(on)")
            let between = out.all("dock")[off.line..<on.line].filter { $0.hasPrefix("{\"seq\"") }
            #expect(between.isEmpty, "ticks between off and on: \(between)")
            // Every tick after the CRTC's last vblank is a vblank of the relit CRTC: on its grid,
            // which the record gives (the recorder, retrying while the CRTC is off, may have
            // started a frame or two after the relight; vsyncd's tick then names an earlier one).
            let relit = try #require(truth.segment(containing: dark.after.timestampNs), "no progression after the replug in the kernel's record")
            let afterDark = dock.filter { $0.timestampNs > dark.before.timestampNs }
            let offGrid = afterDark.filter { abs(Double($0.timestampNs) - Double(relit.fit.predictedTimestamp(forSequence: $0.seq))) > TickCheck.progressionToleranceNs }
            #expect(offGrid.isEmpty, "ticks after the CRTC's last vblank that are no vblank of the relit CRTC: \(offGrid.prefix(3))")
            // vsyncd says off within a second of the CRTC's last vblank, and not before it.
            let other = try Self.record(out, "vkms.1").kernel
            let offDelay = Self.delay(from: dark.before.timestampNs, to: off.monotonicNs, records: [kernel, other])
            print("unplug without a master: off \(offDelay) after the CRTC's last vblank (bound 1000 ms)")
            #expect(off.monotonicNs > dark.before.timestampNs && offDelay.ns < 1_000_000_000, "off \(offDelay) after the CRTC's last vblank")
            // And the follower ticks again soon after the CRTC's first vblank back (less, as for
            // `off`, the time the guest held every process up, the recorder too).
            let back = try #require(afterDark.first, "no tick after the replug")
            let firstBackNs = min(dark.after.timestampNs, back.timestampNs)
            let resume = Self.delay(from: firstBackNs, to: back.receivedNs, records: [kernel, other])
            print("replug without a master: first tick \(resume) after the CRTC's first vblank back (bound \(Double(Self.resumeBoundNs) / 1e6) ms), on vblank \(Int64(back.seq) - Int64(dark.after.sequence)) of the record's")
            #expect(resume.ns < Self.resumeBoundNs, "first tick \(resume) after the CRTC's first vblank back")
        }
        #expect(out.status("dock") == 0, "dock follower: \(out.all("dock.err"))")
        // The other card's client: a tick for every vblank but for short spells, no display event.
        try Self.expectUntouched(out, "other", display: "vkms.1", from: unplug, to: end, "unplug and replug \(master ? "with" : "without") a master (dock's events \(events))")
    }

    /// A whole card disabled and enabled again: vsyncd closes the card's fd (no fd leak), its
    /// follower waits and resumes on the returning card, the other card's client is untouched.
    @Test func aCardDisabledAndEnabledAgain() async throws {
        var script = try Self.script()
        script.layoutUp(Self.layout)
        script.shell("vsyncd_start")
        // card0's vblanks only: the recorder must not hold the card that goes.
        try script.recordKernelOnLayout("k", only: ["vkms.1"])
        script.shell("follow dock --display \"$CONN_dock_1\"")
        script.shell("follow other --display \"$CONN_vkms_1\"")
        script.shell("wait_ticks dock 5; wait_ticks other 5")
        script.shell("echo \"@@fds.before $(ls /proc/$VSYNCD/fd | wc -l)\"; mark disable")
        script.layout("disable dock")
        // Once the follower heard the card go, the card stays gone 2 s.
        script.shell("wait_line dock '\"event\":\"removed\"'; echo \"@@fds.gone $(ls /proc/$VSYNCD/fd | wc -l)\"; sleep 2; mark enable")
        script.shell("n=$(wc -l </tmp/c.dock.out)")
        script.layout("enable dock")
        // Until the follower has ticked a second on the returned card (30 s at most).
        script.shell("wait_ticks dock $((n + 75)); echo \"@@fds.after $(ls /proc/$VSYNCD/fd | wc -l)\"; mark end")
        script.shell("stop dock; stop other; stop k; vsyncd_stop; dump")
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
        try Self.expectUntouched(out, "other", display: "vkms.1", from: disable, to: end, "card disabled and enabled (enable \(Double(enable - disable) / 1e6) ms after disable)")
        #expect(!out.all("vsyncd.log").contains { $0.contains("skipping") && $0.contains("gone") }, "a card coming up was called gone")
    }

    /// Display info stays true for displays nobody follows, and selectors name a card: dock.1's
    /// mode changes from 75 to 120 Hz while no client follows it; a follower selecting it by its
    /// card's bus path (`@faux-dock`, the card's primary display) gets the new mode from its first
    /// tick, with no `modeChanged` first. A bare CRTC id the cards do not share still works.
    @Test func aDisplayNobodyFollowsIsReadAfreshAndSelectedByItsCard() async throws {
        var script = try Self.script()
        script.layoutUp(Self.layout)
        script.shell("vsyncd_start")
        script.shell("follow warm --display \"$CONN_dock_1\" --frames 10; wait $PID_warm")
        script.layout("mode dock.1 120")
        script.shell("sleep 1; mark changed")
        script.shell("follow card --display @faux-dock --frames 30")
        script.shell("CRTC=$(Tests/TestBed/vkms-layout.sh show | awk '$1 == \"dock.1\" { print $4 }'); follow crtc --display \"crtc:$CRTC@card1\" --frames 30")
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
    /// with the new display's record) and ticks at the new primary's rate. Each move is timed
    /// from the kernel's record of card0's CRTC: its last vblank before the off, its first after
    /// the relight.
    @Test func primaryFollowersMoveWhenThePrimaryGoesDarkAndComesBack() async throws {
        var script = try Self.script()
        script.layoutUp(Self.layout)
        script.shell("vsyncd_start")
        try script.recordKernelOnLayout("k")
        script.shell("follow p --display primary")
        script.shell("wait_ticks p 5; mark first")
        // Each step, then until the follower moved (its next modeChanged) and ticked a second
        // there (30 s at most each).
        script.shell("moves=$(grep -c modeChanged /tmp/c.p.out)")
        script.layout("mode vkms.1 off")
        script.shell("wait_line p modeChanged $((moves + 1)); n=$(wc -l </tmp/c.p.out); wait_ticks p $((n + 75)); mark dark")
        script.layout("mode vkms.1 on")
        script.shell("wait_line p modeChanged $((moves + 2)); n=$(wc -l </tmp/c.p.out); wait_ticks p $((n + 60)); mark end")
        script.shell("stop p; stop k; vsyncd_stop; dump")
        let out = try await script.run(timeout: 300)
        #expect(out.result.status == 0 && out.errors.isEmpty && out.status("vsyncd") == 0, "\(out)")
        let first = try #require(out.mark("first")), dark = try #require(out.mark("dark")), end = try #require(out.mark("end"))
        let events = Self.events(out, "p")
        #expect(events.filter { $0 == "modeChanged" }.count >= 2, "p's events: \(events)")
        let card0 = try Self.record(out, "vkms.1").kernel, dock = try Self.record(out, "dock.1").kernel
        let off = try #require(card0.gaps(longerThan: 500_000_000).first { $0.before.timestampNs >= first && $0.after.timestampNs > dark },
                               "no dark spell of card0's CRTC in the kernel's record: \(card0.gaps(longerThan: 100_000_000).map { ($0.before, $0.after) })")
        let ticks = out.ticks("p")
        func hz(_ t: FollowTick) -> Double { 1e9 / Double(t.durationNs) }
        // Which CRTC each tick named: the kernel's own record of each, by sequence and time.
        func on(_ record: KernelRecord, _ t: FollowTick) -> Bool { record.timestamps[t.seq] == t.timestampNs }
        let onCard0 = ticks.filter { $0.timestampNs <= off.before.timestampNs }
        let onDock = ticks.filter { $0.timestampNs > off.before.timestampNs && $0.timestampNs < off.after.timestampNs }
        let back = ticks.filter { $0.timestampNs >= off.after.timestampNs }
        let toDock = try #require(onDock.first, "p got no tick while card0 was dark")
        let toCard0 = try #require(back.first { on(card0, $0) }, "p got no tick from card0 after it came back")
        // Each less the time the guest held every process up meanwhile (the recorder too).
        let toDockDelay = Self.delay(from: off.before.timestampNs, to: toDock.receivedNs, records: [card0, dock])
        let backDelay = Self.delay(from: off.after.timestampNs, to: toCard0.receivedNs, records: [card0, dock])
        let dockHz = 1e9 / customModePeriodNs(75)
        print("primary follower: \(onCard0.count) ticks at \(onCard0.last.map(hz) ?? 0) Hz; on the dock \(toDockDelay) after card0's last vblank (bound 1000 ms), \(onDock.count) ticks at \(onDock.last.map(hz) ?? 0) Hz; back on card0 \(backDelay) after its first vblank back (bound 2000 ms), \(back.count) ticks at \(back.last.map(hz) ?? 0) Hz; events \(events)")
        #expect(!onCard0.isEmpty && onCard0.allSatisfy { on(card0, $0) && abs(hz($0) - 60) < 0.1 }, "on card0 first")
        #expect(onDock.allSatisfy { on(dock, $0) }, "while card0 was dark, ticks not of the dock: \(onDock.filter { !on(dock, $0) }.prefix(3))")
        // vsyncd learns of the off from the kernel at once (its vblank requests fail): the
        // follower moves within a second. It learns of the relight by re-reading the cards,
        // once a second while a `primary` follower runs: back within two.
        #expect(toDockDelay.ns < 1_000_000_000, "p moved to the dock \(toDockDelay) after card0's last vblank")
        #expect(backDelay.ns < 2_000_000_000, "p came back to card0 \(backDelay) after its first vblank back")
        // Once moved, every tick the new primary's, at its rate, and none missed but for short spells.
        let settledOnDock = onDock.filter { $0.timestampNs >= toDock.timestampNs }
        #expect(settledOnDock.allSatisfy { abs(hz($0) - dockHz) < 0.01 }, "on the dock while card0 was dark: \(Set(settledOnDock.map(hz)))")
        let settledBack = back.filter { $0.timestampNs >= toCard0.timestampNs }
        #expect(settledBack.allSatisfy { on(card0, $0) && abs(hz($0) - 60) < 0.1 }, "back on card0: \(Set(settledBack.map(hz)))")
        let dockSpell = TickCheck.longestUntickedSpell(ticks, kernel: dock, from: toDock.timestampNs, to: min(dark, off.after.timestampNs))
        let backSpell = TickCheck.longestUntickedSpell(ticks, kernel: card0, from: toCard0.timestampNs, to: end)
        print("primary follower: longest spell without a tick on the dock \(dockSpell), back on card0 \(backSpell)")
        #expect(dockSpell.ns < Self.untouchedGapNs && backSpell.ns < Self.untouchedGapNs, "spells without a tick: \(dockSpell), \(backSpell)")
    }
}
