import Foundation
import VsyncCore

/// One guest shell script running vsyncd and its clients (one VM boot per test), built on the
/// functions of Tests/TestBed/guest-vsyncd-lib.sh, and what it printed.
struct VsyncdGuestScript {
    let bin: String
    /// Where the test helpers are (vkms-modeset): the debug build, which has them.
    let tools: String
    /// The guest's clock first (@@clock lines): its clocksource and how the kernel set its TSC
    /// rate. Every time a test reads is on that clock; a guest whose TSC calibration failed on a
    /// busy host runs on another, and a failure's figures are read with that in mind.
    private(set) var lines: [String] = [
        "set -u", ". Tests/TestBed/guest-vsyncd-lib.sh",
        #"echo "@@clock source $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource)"; dmesg | grep -E 'tsc: |Switched to clocksource' | sed 's/^/@@clock /'"#,
    ]
    /// Boot with qemu's virtio-gpu as card1 (vm-run.sh --virtio-gpu): a real driver with an EDID.
    var virtioGPU = false
    /// Boot with the host's TSC rate (vm-run.sh --host-tsc): the guest has high-resolution timers
    /// however busy the host is. Without it a busy host fails the guest's TSC calibration, and
    /// every timer in the guest then fires on the 250 Hz tick: up to 4 ms late, the guest
    /// kernel's lateness, not the daemon's.
    var hostTSC = false
    /// More kernel command line (vm-run.sh --append).
    var append: String?

    /// `release`: vsyncd and vsync-probe from the release build, for tests that measure timing.
    /// Under TCG a debug build runs several times slower, and its wake-ups measure the build,
    /// not the daemon that ships.
    init(release: Bool = false) throws {
        let vsyncd = try release ? GuestVM.releaseProductPath("vsyncd") : GuestVM.productPath("vsyncd")
        bin = URL(fileURLWithPath: vsyncd).deletingLastPathComponent().path
        tools = URL(fileURLWithPath: try GuestVM.productPath("vkms-modeset")).deletingLastPathComponent().path
        // The script runs it from the same directory: fail here, clearly, if it is missing.
        if release {
            _ = try GuestVM.releaseProductPath("vsync-probe")
        } else if !FileManager.default.isExecutableFile(atPath: bin + "/vsync-probe") {
            throw GuestVMError.productMissing(name: "vsync-probe", path: bin + "/vsync-probe")
        }
    }

    mutating func shell(_ line: String) { lines.append(line) }

    /// `vsync-probe list --json`, tagged `list`: the default mode's exact refresh.
    mutating func listDisplays() { shell("\"$VSYNC_BIN/vsync-probe\" list --json | tr -d '\\n' | sed 's/^/@@list /'; echo") }

    func run(timeout: Int = 300) async throws -> VsyncdGuestOutput {
        let result = try await GuestVM.run(
            ["sh", "-c", lines.joined(separator: "\n")], timeout: timeout, env: ["VSYNC_BIN": bin, "VSYNC_TOOLS": tools],
            append: append, virtioGPU: virtioGPU, hostTSC: hostTSC)
        // Kept for reading after a failure: the checks print their verdicts, not the whole run.
        if let keep = ProcessInfo.processInfo.environment["VSYNCD_VM_KEEP"] {
            let name = "guest-\(UInt64(Date().timeIntervalSince1970 * 1000)).out"
            try? result.description.write(toFile: (keep as NSString).appendingPathComponent(name), atomically: true, encoding: .utf8)
        }
        return VsyncdGuestOutput(result: result)
    }
}

/// One tick as `vsync-probe follow --json` prints it.
struct FollowTick: Decodable, Sendable {
    var seq: UInt64
    var timestampNs: UInt64
    var targetTimestampNs: UInt64
    var durationNs: UInt64
    var skipped: Int
    var flags: [String]
    var latencyUs: Double
    var receivedNs: UInt64 { timestampNs &+ UInt64(max(0, latencyUs * 1000)) }
}

/// The last line of `vsync-probe follow --json`.
struct FollowSummary: Decodable {
    var ticks: Int
    var skipped: Int
    var achievedHz: Double
}

/// One line of Tests/TestBed/guest-vsyncd-client.py.
struct RawMessage: Decodable {
    var type: String
    var kind: String?
    var mhz: UInt64?
    var periodNs: UInt64?
    var divisor: UInt32?
    var seq: UInt64?
    var timestampNs: UInt64?
    var durationNs: UInt64?
    var recvNs: UInt64?
}

/// What a VsyncdGuestScript printed, by tag (`@@TAG rest`).
struct VsyncdGuestOutput: CustomStringConvertible {
    let result: GuestResult

    func all(_ tag: String) -> [String] {
        let prefix = "@@\(tag) "
        return result.stdout.split(separator: "\n").filter { $0.hasPrefix(prefix) }.map { String($0.dropFirst(prefix.count)) }
    }

    /// Client NAME's ticks, in the order it printed them.
    func ticks(_ name: String) -> [FollowTick] {
        all(name).filter { $0.hasPrefix("{\"seq\"") }.compactMap { try? JSONDecoder().decode(FollowTick.self, from: Data($0.utf8)) }
    }

    func summary(_ name: String) -> FollowSummary? {
        all(name).last { $0.contains("\"summary\":true") }.flatMap { try? JSONDecoder().decode(FollowSummary.self, from: Data($0.utf8)) }
    }

    func raw(_ name: String) -> [RawMessage] {
        all(name).compactMap { try? JSONDecoder().decode(RawMessage.self, from: Data($0.utf8)) }
    }

    /// The guest CLOCK_MONOTONIC time of `mark NAME` (the last one of that name).
    func mark(_ name: String) -> UInt64? {
        all("mark").compactMap { line -> UInt64? in
            let parts = line.split(separator: " ")
            return parts.count == 2 && parts[0] == name ? UInt64(parts[1]) : nil
        }.last
    }

    func status(_ name: String) -> Int? { all("\(name).status").first.flatMap { Int($0) } }
    var log: [String] { all("vsyncd.log") }
    /// The guest's clocksource and the kernel's TSC lines (VsyncdGuestScript's first lines).
    var clock: [String] { all("clock") }
    var errors: [String] { all("error") }

    /// The default mode's exact refresh, from `vsync-probe list --json` (tag `list`).
    func defaultRefreshHz() throws -> Double {
        let listing = try JSONDecoder().decode(ProbeListing.self, from: Data((all("list").first ?? "").utf8))
        let card = listing.cards.first { $0.path == "/dev/dri/card0" }
        let connector = card?.connectors.first { $0.name == "Virtual-1" }
        guard let hz = card?.crtcs.first(where: { $0.id == connector?.crtcId })?.nominalHz else {
            throw VsyncdVMError("no active Virtual-1 CRTC in vsync-probe list: \(all("list"))")
        }
        return hz
    }

    var description: String { result.description }
}

struct VsyncdVMError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// The exact period of the 1024x768 custom mode vkms-modeset sets for `hertz`.
func customModePeriodNs(_ hertz: Double) -> Double {
    ModeTimings.custom(hertz: hertz).refreshRate?.periodNanoseconds ?? .nan
}
