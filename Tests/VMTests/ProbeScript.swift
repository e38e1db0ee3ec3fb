import Foundation
import VsyncCore

/// Builds one guest shell script for several probe steps (one VM boot per test), and reads back
/// the tagged lines it prints: `@@TAG rest-of-line`.
struct ProbeScript {
    let probe: String
    let modeset: String
    private(set) var lines: [String] = ["set -u"]

    init() throws {
        probe = try GuestVM.productPath("vsync-probe")
        modeset = try GuestVM.productPath("vkms-modeset")
        // hold STEP: run vkms-modeset in the background until release; wait for its line
        // (the mode is set once it is printed). Its output goes to a file, not our streams.
        lines += [
            "hold() { '\(modeset)' --hold 600 \"$@\" >/tmp/modeset.out 2>&1 & MODESET=$!;",
            "  for i in $(seq 300); do grep -q '^vkms-modeset: ' /tmp/modeset.out && break; sleep 0.05; done;",
            "  sed 's/^/@@modeset /' /tmp/modeset.out; }",
            "release() { kill $MODESET; wait $MODESET; }",
        ]
    }

    /// Runs the probe with `arguments`; prints `@@TAG <stdout on one line>`, `@@TAG.status N`
    /// and each stderr line as `@@TAG.stderr LINE`.
    mutating func probe(_ tag: String, _ arguments: String) {
        lines += [
            "out=$('\(probe)' \(arguments) 2>/tmp/probe.err); status=$?",
            "printf '@@%s %s\\n' '\(tag)' \"$(printf '%s' \"$out\" | tr '\\n' '\\t')\"",
            "echo '@@\(tag).status' $status",
            "sed 's/^/@@\(tag).stderr /' /tmp/probe.err",
        ]
    }

    /// libdrm's vbltest for `seconds`: prints `@@TAG freq: A Hz freq: B Hz ...`. It leaves its
    /// loop when stdin is readable, so stdin is a pipe that stays silent.
    mutating func vbltest(_ tag: String, seconds: Int = 4) {
        lines.append(
            "echo '@@\(tag)' $(sleep \(seconds + 1) | timeout \(seconds) stdbuf -oL vbltest -M vkms 2>&1 | grep -o 'freq: [0-9.]*Hz' | tr '\\n' ' ')")
    }

    mutating func shell(_ line: String) { lines.append(line) }

    var command: [String] { ["sh", "-c", lines.joined(separator: "\n")] }

    func run(timeout: Int = 240) async throws -> ProbeOutput {
        ProbeOutput(result: try await GuestVM.run(command, timeout: timeout))
    }
}

/// What a ProbeScript printed, by tag.
struct ProbeOutput: CustomStringConvertible {
    let result: GuestResult

    /// Every line tagged `tag`, without the tag.
    func all(_ tag: String) -> [String] {
        let prefix = "@@\(tag) "
        return result.stdout.split(separator: "\n", omittingEmptySubsequences: false)
            .filter { $0.hasPrefix(prefix) || $0 == "@@\(tag)" }
            .map { String($0.dropFirst(min(prefix.count, $0.count))) }
    }

    func line(_ tag: String) -> String? { all(tag).first }
    func status(_ tag: String) -> Int? { line("\(tag).status").flatMap { Int($0) } }
    func stderr(_ tag: String) -> [String] { all("\(tag).stderr") }

    func measurement(_ tag: String) throws -> ProbeMeasurement {
        let text = line(tag) ?? ""
        return try JSONDecoder().decode(ProbeMeasurement.self, from: Data(text.utf8))
    }

    /// The frequencies vbltest printed.
    func vbltestRates(_ tag: String) -> [Double] {
        (line(tag) ?? "").split(separator: " ").compactMap { word in
            word.hasSuffix("Hz") ? Double(word.dropLast(2)) : nil
        }
    }

    var description: String { result.description }
}

/// `vsync-probe measure --json`, as the tests read it.
struct ProbeMeasurement: Decodable {
    struct Spread: Decodable { var p50: Double; var p99: Double; var max: Double }
    var device: String
    var driver: String?
    var crtcId: UInt32
    var connector: String?
    var mode: String?
    var timings: ModeTimings?
    var source: String?
    var monotonic: Bool?
    var frames: Int
    var missed: Int
    var nominalHz: Double
    var measuredHz: Double
    var ppm: Double
    var jitterUs: Spread
    var wakeLatencyUs: Spread
}

/// `vsync-probe list --json`.
struct ProbeListing: Decodable {
    struct Card: Decodable {
        var path: String
        var driver: String?
        var error: String?
        var connectors: [Connector]
        var crtcs: [CRTC]
    }
    struct Connector: Decodable {
        var id: UInt32; var name: String; var status: String; var crtcId: UInt32?
        /// vrr_capable (read since protocol 5): vkms has no such property.
        var variableRefreshCapable: Bool?
    }
    struct CRTC: Decodable {
        var id: UInt32
        var active: Bool
        var mode: String?
        var nominalHz: Double?
        var vblank: Bool
    }
    var cards: [Card]
}

/// Relative error in parts per million.
func ppm(_ measured: Double, against exact: Double) -> Double { (measured - exact) / exact * 1e6 }

/// Hz with six decimals, as the probe prints it.
func sixDecimals(_ hz: Double) -> String { String(format: "%.6f", hz) }

/// Microseconds to one decimal, for the side-by-side lines.
func us(_ value: Double) -> String { String(format: "%.1f", value) }
