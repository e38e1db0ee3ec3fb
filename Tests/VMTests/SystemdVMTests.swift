import Foundation
import Testing

/// The vsyncd Debian package under real systemd as PID 1, on vkms in the VM test bed, with the
/// Swift toolchain hidden, as a user installs it: dpkg's maintainer scripts start the socket, the
/// first client starts the daemon as a dynamic user in group video that reaches /dev/dri/card0
/// through DeviceAllow, ticks flow for 30 s through a mode change with the system-call
/// filter killing nothing, the watchdog fed and the unit's real-time policy in force, the daemon
/// stops cleanly, and denied the device the daemon fails with its one line in the journal. Who may
/// connect is judged on a real login: udevd tags the card for uaccess, an autologin getty on tty1
/// opens a session through PAM (pam_systemd) that logind makes the active one on seat0, logind
/// gives its user (in no group) an ACL entry on the card, and that user follows ticks from inside
/// the session; a second user with no session is refused with the daemon's line, and so is the
/// first once logind has ended its session and taken the entry away. A client in a systemd
/// scope named as Flatpak names its apps' is named by its app id in the daemon's log.
/// Tests/TestBed/guest-systemd-check.sh does the steps.
@Suite(.serialized)
struct SystemdVMTests {
    static let checks = [
        "pid1-is-systemd", "journald", "toolchain-hidden", "udev-card0", "dpkg-install", "socket-enabled",
        "socket-listening", "socket-mode", "no-daemon-before-a-client", "socket-activation",
        "ready-and-status", "dynamic-user", "group-video", "realtime-rr-1", "device-open", "mode-change",
        "watchdog-kept-alive", "journal-has-the-daemon", "no-sigsys", "clean-stop",
        "flatpak-scope-app-id", "logind", "seat-session-active", "seat-acl-by-logind", "no-session-refused",
        "seat-acl-ticks", "session-ended-refused", "refusal-logged",
        "denied-device-one-line", "denied-device-not-active", "security-exposure",
    ]
    /// Three of the watchdog's 10 s periods, with a mode change half way.
    static let seconds = 30

    @Test func packageUnderSystemdServesTicksHardened() async throws {
        let debs = PackageDirectory.path
        for package in ["vsyncd", "libvsync1"] {
            let found = (try? FileManager.default.contentsOfDirectory(atPath: debs))?.contains { $0.hasPrefix(package + "_") && $0.hasSuffix(".deb") } ?? false
            try #require(found, "no \(package) .deb in \(debs): run Scripts/package.sh first")
        }
        let modeset = try GuestVM.productPath("vkms-modeset")
        let script = GuestVM.repositoryRoot.appendingPathComponent("Tests/TestBed/guest-systemd-check.sh").path
        // The ticks, dpkg, and a login on the seat (udevd, dbus, logind, PAM) under TCG.
        let result = try await GuestVM.run(
            [script], timeout: 600,
            env: ["VSYNC_DEB_DIR": debs, "VSYNC_HIDE": try Self.toolchainRoot(),
                  "VSYNC_BIN": URL(fileURLWithPath: modeset).deletingLastPathComponent().path,
                  "VSYNC_SECONDS": String(Self.seconds)],
            systemd: true)
        let lines = result.stdout.split(separator: "\n").map(String.init)
        #expect(result.status == 0 && lines.contains("@@done"), "\(result)")

        var seen: [String: String] = [:]
        for line in lines where line.hasPrefix("@@check ") {
            let words = line.split(separator: " ", maxSplits: 3).map(String.init)
            guard words.count >= 3 else { continue }
            seen[words[1]] = words[2] + (words.count > 3 ? " " + words[3] : "")
        }
        for name in Self.checks {
            let line = seen[name]
            #expect(line?.hasPrefix("ok") == true, "\(name): \(line ?? "not reached")")
            if let line { print("systemd VM: \(name): \(line)") }
        }
        for line in lines where line.hasPrefix("@@figure ") { print("systemd VM: \(line.dropFirst(9))") }

        // Both clients ticked through the whole run, across the mode change and back.
        for (client, fps) in [("full", 60), ("half", 30)] {
            let ticks = Self.ticks(lines, client)
            let events = lines.filter { $0.hasPrefix("@@\(client) {\"event\":\"modeChanged\",\"refreshHz\":50.0") }
            #expect(events.count == 1, "\(client): changes to 50 Hz seen: \(events)")
            // TCG on a loaded host drops frames; every one is counted in skipped, and sequences rise.
            #expect(ticks.count >= Self.seconds * fps * 4 / 10, "\(client): \(ticks.count) ticks in \(Self.seconds) s at \(fps) fps")
            #expect(zip(ticks, ticks.dropFirst()).allSatisfy { $0.seq < $1.seq }, "\(client): sequence not rising")
            let span = Double((ticks.last?.timestampNs ?? 0) &- (ticks.first?.timestampNs ?? 0)) / 1e9
            #expect(span >= Double(Self.seconds) * 0.8, "\(client): ticks span only \(span) s")
            let errors = lines.filter { $0.hasPrefix("@@\(client).err ") }
            #expect(errors.isEmpty, "\(client) stderr: \(errors.prefix(5))")
            print("systemd VM: \(client) (\(fps) fps): \(ticks.count) ticks over \(String(format: "%.1f", span)) s, \(events.count) change to 50 Hz")
        }
    }

    struct Tick { var seq: UInt64; var timestampNs: UInt64 }

    /// The client's JSON tick lines: "seq" and "timestampNs".
    static func ticks(_ lines: [String], _ client: String) -> [Tick] {
        lines.compactMap { line -> Tick? in
            let prefix = "@@\(client) {\"seq\":"
            guard line.hasPrefix(prefix),
                  let data = line.dropFirst(client.count + 3).data(using: .utf8),
                  let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
                  let seq = (object["seq"] as? NSNumber)?.uint64Value,
                  let ts = (object["timestampNs"] as? NSNumber)?.uint64Value else { return nil }
            return Tick(seq: seq, timestampNs: ts)
        }
    }

    /// The Swift toolchain's root (up from usr/bin of the real `swift`), hidden in the guest.
    static func toolchainRoot() throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", "readlink -f \"$(command -v swift)\""]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let out = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        let bin = URL(fileURLWithPath: out.trimmingCharacters(in: .whitespacesAndNewlines)).deletingLastPathComponent()
        try #require(bin.path.hasSuffix("/usr/bin"), "cannot find the toolchain from \(out)")
        return bin.deletingLastPathComponent().deletingLastPathComponent().path
    }
}

/// Where Scripts/test.sh puts the packages (Scripts/package.sh), or $VSYNCD_DEB_DIR.
enum PackageDirectory {
    static var path: String {
        ProcessInfo.processInfo.environment["VSYNCD_DEB_DIR"] ?? GuestVM.repositoryRoot.appendingPathComponent("out/deb").path
    }
}
