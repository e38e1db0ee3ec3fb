import Foundation

/// A display layout built in the guest by Tests/TestBed/vkms-layout.sh, as `vkms-layout.sh show`
/// printed it (one `@@layout` line per display: DISPLAY CARD CONNECTOR CRTC STEP).
struct VkmsLayout {
    struct Display {
        /// DEVICE.N, e.g. dock.2.
        var name: String
        /// The card's node, e.g. /dev/dri/card1.
        var card: String
        var connector: String
        var crtc: UInt32
        var step: String
        /// The recorder's name for this CRTC (cards' CRTC ids collide).
        var kernelCRTC: KernelCRTC { KernelCRTC(card: URL(fileURLWithPath: card).lastPathComponent, crtc: crtc) }
    }

    var displays: [Display]

    init(_ lines: [String]) {
        displays = lines.compactMap { line in
            let f = line.split(separator: " ").map(String.init)
            guard f.count == 5, let crtc = UInt32(f[3]) else { return nil }
            return Display(name: f[0], card: f[1], connector: f[2], crtc: crtc, step: f[4])
        }
    }

    subscript(_ name: String) -> Display? { displays.first { $0.name == name } }

    /// The `up` argument for these devices and steps, e.g. ["vkms=60", "dock=75,144"].
    static func upArguments(_ devices: [(device: String, steps: [String])]) -> String {
        devices.map { "\($0.device)=\($0.steps.joined(separator: ","))" }.joined(separator: " ")
    }
}

extension VsyncdGuestScript {
    /// `vkms-layout.sh up LAYOUT`, then its `show` lines tagged `layout`; shell variables
    /// CONN_<device>_<n> hold each display's connector name (e.g. CONN_dock_2).
    mutating func layoutUp(_ layout: String) {
        shell("Tests/TestBed/vkms-layout.sh up \(layout) >/tmp/layout.out 2>&1 || echo \"@@error vkms-layout up: $(tail -n1 /tmp/layout.out)\"")
        shell("sed 's/^/@@layout.log /' /tmp/layout.out")
        shell("Tests/TestBed/vkms-layout.sh show | sed 's/^/@@layout /'")
        shell(#"eval "$(Tests/TestBed/vkms-layout.sh show | awk '{ split($1, d, "."); printf "CONN_%s_%s=%s\n", d[1], d[2], $3 }')""#)
    }

    /// Runs `vkms-layout.sh ARGS` in the foreground, its lines tagged `layout.step` with the time.
    mutating func layout(_ arguments: String) {
        shell("Tests/TestBed/vkms-layout.sh \(arguments) 2>&1 | while read -r line; do echo \"@@layout.step $(mono_ns) $line\"; done")
    }
}

/// The rates a multi-display test uses: VSYNCD_TEST_RATES (comma-separated Hz) if set, so that
/// the same tests run at other rates, else `defaults`.
func testRates(_ defaults: [Double], variable: String = "VSYNCD_TEST_RATES") -> [Double] {
    guard let text = ProcessInfo.processInfo.environment[variable] else { return defaults }
    let rates = text.split(separator: ",").compactMap { Double($0.trimmingCharacters(in: .whitespaces)) }
    return rates.count == defaults.count && rates.allSatisfy({ $0 > 20 && $0 < 500 }) ? rates : defaults
}
