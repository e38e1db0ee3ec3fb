import Foundation
import Testing
import VsyncCore

/// vsync-probe and vkms-modeset against vkms in the VM test bed. Each test is one guest boot.
@Suite(.serialized)
struct ProbeTests {
    /// The bound set for measured against exact refresh.
    static let tolerancePPM = 5.0

    @Test func measuresTheDefaultModeWithin5ppm() async throws {
        var script = try ProbeScript()
        script.probe("measure", "measure --json --frames 240")
        let out = try await script.run()
        #expect(out.status("measure") == 0, "\(out)")
        let m = try out.measurement("measure")

        // The nominal rate must be the timings' exact rate, redone here with ModeTimings.
        let timings = try #require(m.timings, "no timings in the JSON: \(out)")
        let exact = try #require(timings.refreshRate).hertz
        #expect(abs(m.nominalHz - exact) / exact < 1e-12, "nominal \(m.nominalHz) vs timings \(exact)")
        #expect(timings.hdisplay == 1024 && timings.vdisplay == 768, "fbcon's vkms mode is 1024x768: \(out)")
        #expect(m.connector == "Virtual-1" && m.driver == "vkms" && m.device == "/dev/dri/card0", "\(out)")
        #expect(m.source == "crtc-sequence", "vkms on 6.1 has drmCrtcQueueSequence: \(out)")
        #expect(m.monotonic == true)
        #expect(m.frames == 240)

        let error = ppm(m.measuredHz, against: exact)
        print("default mode \(sixDecimals(exact)) Hz: vsync-probe \(sixDecimals(m.measuredHz)) Hz (\(String(format: "%.3f", error)) ppm), jitter p50/p99/max \(us(m.jitterUs.p50))/\(us(m.jitterUs.p99))/\(us(m.jitterUs.max)) µs, wake-up p50/p99/max \(us(m.wakeLatencyUs.p50))/\(us(m.wakeLatencyUs.p99))/\(us(m.wakeLatencyUs.max)) µs, missed \(m.missed)")
        #expect(abs(error) < Self.tolerancePPM, "\(out)")
        #expect(abs(m.ppm - error) < 1e-6, "the probe's own ppm disagrees: \(m.ppm) vs \(error)")
        #expect(m.wakeLatencyUs.p50 > 0, "receipt must come after the vblank: \(out)")
    }

    /// Custom modes on 1024x768 timings, each measured by vsync-probe and by vbltest.
    @Test func customModesWithin5ppmAndCloserThanVbltest() async throws {
        let modes: [Double] = [75, 144, 59.94, 100]
        var script = try ProbeScript()
        for hz in modes {
            script.shell("hold \(hz)")
            script.probe("measure-\(hz)", "measure --json --frames 240")
            script.vbltest("vbltest-\(hz)")
            script.shell("release")
        }
        let out = try await script.run(timeout: 300)
        #expect(out.result.status == 0, "\(out)")

        for hz in modes {
            let timings = ModeTimings.custom(hertz: hz)
            let exact = try #require(timings.refreshRate).hertz
            let modesetLine = out.line("modeset") ?? ""
            #expect(out.all("modeset").contains { $0.contains("rate \(sixDecimals(exact)) Hz") },
                    "vkms-modeset did not report \(sixDecimals(exact)) Hz: \(modesetLine)")
            #expect(out.status("measure-\(hz)") == 0, "\(out)")
            let m = try out.measurement("measure-\(hz)")
            // The kernel reports back exactly the mode we set.
            #expect(m.timings?.clockKHz == timings.clockKHz && m.timings?.htotal == timings.htotal
                    && m.timings?.vtotal == timings.vtotal, "CRTC mode \(String(describing: m.timings)) is not \(timings)")
            #expect(abs(m.nominalHz - exact) / exact < 1e-12)

            let ours = ppm(m.measuredHz, against: exact)
            let vbl = try #require(out.vbltestRates("vbltest-\(hz)").last, "vbltest printed no rate at \(hz) Hz: \(out)")
            let theirs = ppm(vbl, against: exact)
            print("mode \(sixDecimals(exact)) Hz: vsync-probe \(sixDecimals(m.measuredHz)) Hz (\(String(format: "%.3f", ours)) ppm), vbltest \(String(format: "%.2f", vbl)) Hz (\(String(format: "%.1f", theirs)) ppm); jitter p99 \(us(m.jitterUs.p99)) µs, wake-up p50/p99 \(us(m.wakeLatencyUs.p50))/\(us(m.wakeLatencyUs.p99)) µs, missed \(m.missed)")
            #expect(abs(ours) < Self.tolerancePPM, "\(hz) Hz mode measured \(ours) ppm off: \(out)")
            #expect(abs(ours) < abs(theirs), "vbltest (\(vbl) Hz) was closer to \(exact) Hz than vsync-probe (\(m.measuredHz) Hz)")
        }
    }

    @Test func waitVBlankFallbackWithin5ppm() async throws {
        var script = try ProbeScript()
        script.shell("hold 144")
        script.probe("legacy", "measure --json --frames 240 --method waitvblank")
        script.shell("release")
        let out = try await script.run()
        #expect(out.status("legacy") == 0, "\(out)")
        let m = try out.measurement("legacy")
        #expect(m.source == "wait-vblank", "\(out)")
        let exact = try #require(ModeTimings.custom(hertz: 144).refreshRate).hertz
        let error = ppm(m.measuredHz, against: exact)
        print("wait-vblank path, mode \(sixDecimals(exact)) Hz: vsync-probe \(sixDecimals(m.measuredHz)) Hz (\(String(format: "%.3f", error)) ppm), jitter p99 \(us(m.jitterUs.p99)) µs")
        #expect(abs(error) < Self.tolerancePPM, "\(out)")
        #expect(m.missed < 24, "more than 10 % of vblanks missed: \(out)")
    }

    @Test func crtcTurnedOffGivesOneClearLineAndFails() async throws {
        var script = try ProbeScript()
        script.shell("hold off")
        script.probe("off", "measure --frames 10")
        script.probe("offjson", "measure --frames 10 --json")
        script.shell("release")
        let out = try await script.run()
        #expect(out.all("modeset").contains { $0.hasPrefix("vkms-modeset: off crtc") }, "\(out)")
        for tag in ["off", "offjson"] {
            #expect((out.status(tag) ?? 0) != 0, "\(out)")
            let lines = out.stderr(tag)
            #expect(lines.count == 1, "expected one stderr line: \(out)")
            let line = lines.first ?? ""
            #expect(line.contains("is off") && line.contains("/dev/dri/card0") && line.contains("--crtc"), "\(line)")
            #expect(out.line(tag)?.isEmpty ?? true, "nothing on stdout: \(out)")
        }
    }

    @Test func listShowsConnectorCRTCAndMode() async throws {
        var script = try ProbeScript()
        script.probe("text", "list")
        script.probe("json", "list --json")
        script.probe("measure", "measure --json --frames 20")
        let out = try await script.run()
        #expect(out.status("text") == 0 && out.status("json") == 0, "\(out)")
        let listing = try JSONDecoder().decode(ProbeListing.self, from: Data((out.line("json") ?? "").utf8))
        let card = try #require(listing.cards.first { $0.path == "/dev/dri/card0" }, "\(out)")
        #expect(card.driver == "vkms")
        let connector = try #require(card.connectors.first { $0.name == "Virtual-1" }, "no Virtual-1: \(out)")
        #expect(connector.status == "connected")
        let crtc = try #require(card.crtcs.first { $0.id == connector.crtcId }, "Virtual-1 has no CRTC: \(out)")
        #expect(crtc.active && crtc.vblank && (crtc.mode ?? "").contains("1024x768"), "\(out)")

        // list's nominal refresh is the same exact figure measure works from, to six decimals
        // in the text output too.
        let m = try out.measurement("measure")
        #expect(m.crtcId == crtc.id)
        let hz = try #require(crtc.nominalHz)
        #expect(abs(hz - m.nominalHz) < 1e-9)
        let text = (out.line("text") ?? "").replacingOccurrences(of: "\t", with: "\n")
        #expect(text.contains("Virtual-1") && text.contains("CRTC \(crtc.id)") && text.contains("\(sixDecimals(hz)) Hz"), "\(text)")
        // vkms has no VRR: no vrr_capable property, read as not capable.
        #expect(connector.variableRefreshCapable == false, "\(out)")
        #expect(text.contains("Virtual-1: connected") && text.contains("variable refresh: not capable"), "\(text)")
    }

    @Test func unknownCRTCGivesOneLineListingValidIDs() async throws {
        var script = try ProbeScript()
        script.probe("bad", "measure --crtc 9999 --frames 10")
        script.probe("json", "list --json")
        let out = try await script.run()
        #expect((out.status("bad") ?? 0) != 0, "\(out)")
        let lines = out.stderr("bad")
        #expect(lines.count == 1, "\(out)")
        let listing = try JSONDecoder().decode(ProbeListing.self, from: Data((out.line("json") ?? "").utf8))
        let ids = listing.cards.flatMap(\.crtcs).map(\.id)
        #expect(!ids.isEmpty)
        let line = lines.first ?? ""
        #expect(line.contains("9999") && ids.allSatisfy { line.contains(String($0)) }, "\(line)")
    }

    /// The errors that need a different guest setup: no device node at all, and a user who may
    /// not open it.
    @Test func noDeviceAndPermissionDeniedEachGiveOneLine() async throws {
        var script = try ProbeScript()
        // /dev/dri hidden under an empty tmpfs in a private mount namespace.
        script.shell("unshare -m sh -c 'mount -t tmpfs none /dev/dri && \"$0\" \"$@\"' '\(script.probe)' measure >/tmp/nodev.out 2>/tmp/nodev.err; echo '@@nodev.status' $?")
        script.shell("sed 's/^/@@nodev.stderr /' /tmp/nodev.err")
        script.shell("unshare -m sh -c 'mount -t tmpfs none /dev/dri && \"$0\" \"$@\"' '\(script.probe)' list >/dev/null 2>/tmp/nodevlist.err; echo '@@nodevlist.status' $?")
        script.shell("sed 's/^/@@nodevlist.stderr /' /tmp/nodevlist.err")
        // An unprivileged user on the root-only vkms node.
        script.shell("chmod 0660 /dev/dri/card0")
        script.shell("echo \"@@group $(stat -c %G /dev/dri/card0)\"")
        script.shell("setpriv --reuid=65534 --regid=65534 --clear-groups '\(script.probe)' measure --frames 10 >/dev/null 2>/tmp/perm.err; echo '@@perm.status' $?")
        script.shell("sed 's/^/@@perm.stderr /' /tmp/perm.err")
        let out = try await script.run()

        for tag in ["nodev", "nodevlist"] {
            #expect((out.status(tag) ?? 0) != 0, "\(out)")
            #expect(out.stderr(tag).count == 1, "\(out)")
            #expect(out.stderr(tag).first?.contains("no DRM device") == true, "\(out)")
        }
        #expect((out.status("perm") ?? 0) != 0, "\(out)")
        let lines = out.stderr("perm")
        #expect(lines.count == 1, "\(out)")
        let line = lines.first ?? ""
        let group = try #require(out.line("group"))
        #expect(line.contains("permission denied") && line.contains("/dev/dri/card0"), "\(line)")
        #expect(line.contains("group '\(group == "root" ? "video" : group)'"), "\(line) (node group \(group))")
    }
}
