// vkms-modeset: a test helper that sets exact custom modes (and turns the CRTC off) on a DRM
// device, holding each one while tests measure it. Steps run in order:
//
//   vkms-modeset [--device /dev/dri/card0] [--connector ID|NAME] [--hold 3] 60 144 75 off on 59.94 81000khz
//
//   HZ          1024x768 timings (ModeTimings.custom) with the whole-kHz clock nearest HZ
//   KHZkhz      the same timings at exactly this pixel clock (also: --clock KHZ as a first step)
//   off         disable the CRTC (vblank waits on it then fail with EINVAL)
//   on          the connector's preferred mode
//   master      take DRM master and hold it, changing nothing (a compositor's stand-in)
//
// One line per step goes to stdout as soon as the step is done, e.g.
//   vkms-modeset: mode 1024x768@75.000 rate 75.000185 Hz (75.000 Hz) clock 81000 kHz crtc 38 connector Virtual-1 device /dev/dri/card0
//   vkms-modeset: off crtc 38 device /dev/dri/card0
// The framebuffer belongs to our fd, so the process stays alive while holding; SIGTERM/SIGINT
// end the hold and exit 0. With --drop-master it gives DRM master back after each step, so that
// several holders (one per display, as Tests/TestBed/vkms-layout.sh runs them) share one card.
import ArgumentParser
import Foundation
import Glibc
import VsyncCore
import VsyncDRM

struct VkmsModeset: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "vkms-modeset",
        abstract: "Set exact custom modes or turn a CRTC off, holding each step (test helper)."
    )

    enum Step: ExpressibleByArgument, CustomStringConvertible, Equatable {
        case hertz(Double), clock(UInt32), off, on, master

        init?(argument: String) {
            let lower = argument.lowercased()
            switch lower {
            case "off": self = .off
            case "on": self = .on
            case "master": self = .master
            default:
                if lower.hasSuffix("khz"), let khz = UInt32(lower.dropLast(3)), khz > 0 {
                    self = .clock(khz)
                } else if let hz = Double(lower), hz > 0, hz < 1000 {
                    self = .hertz(hz)
                } else {
                    return nil
                }
            }
        }

        var description: String {
            switch self {
            case .hertz(let hz): "\(hz)"
            case .clock(let khz): "\(khz)khz"
            case .off: "off"
            case .on: "on"
            case .master: "master"
            }
        }
    }

    @Option(help: "DRM primary node.")
    var device = "/dev/dri/card0"

    @Option(help: "CRTC object id (default: the one driving the connector, else the first).")
    var crtc: UInt32?

    @Option(help: "Connector object id or name, e.g. Virtual-2 (default: the first connected one).")
    var connector: String?

    @Flag(help: "Give DRM master back after each step, so other holders can set the card's other CRTCs.")
    var dropMaster = false

    @Option(help: "Seconds to hold each step.")
    var hold: Double = 3

    @Option(help: "Active width and height of custom modes.")
    var width: UInt16 = 1024
    @Option var height: UInt16 = 768

    @Option(help: "Pixel clock in kHz: a first step with exactly this clock on the custom timings.")
    var clock: UInt32?

    @Argument(help: "Steps: HZ, KHZkhz, off, on, master.")
    var steps: [Step] = []

    func run() throws {
        let allSteps = (clock.map { [Step.clock($0)] } ?? []) + steps
        guard !allSteps.isEmpty else { throw ValidationError("give at least one step (e.g. 75 or off)") }
        do {
            try execute(allSteps)
        } catch let error as DRMError {
            FileHandle.standardError.write(Data("vkms-modeset: \(error)\n".utf8))
            throw ExitCode(1)
        }
    }

    func execute(_ allSteps: [Step]) throws {
        // Block the signals so the hold can wait for them synchronously.
        var signals = sigset_t()
        sigemptyset(&signals)
        sigaddset(&signals, SIGTERM)
        sigaddset(&signals, SIGINT)
        pthread_sigmask(SIG_BLOCK, &signals, nil)

        let card = try Card(path: device)
        let res = try card.resources(probingConnectors: true)
        let named = connector.flatMap { c in res.connectors.first { String($0.id) == c || $0.name == c } }
        guard let conn = named ?? (connector == nil ? res.connectors.first(where: { $0.status == .connected }) ?? res.connectors.first : nil),
              let index = res.connectors.firstIndex(where: { $0.id == conn.id }) else {
            let known = res.connectors.map { "\($0.id) \($0.name)" }.joined(separator: ", ")
            throw DRMError(kind: .other, errno: ENOENT, device: device, operation: "no connector \(connector ?? "") (there are: \(known))")
        }
        // A dark connector has no CRTC yet: take the one at its own index. vkms's default device
        // has one of each, and Tests/TestBed/vkms-layout.sh links connector i to CRTC i.
        let crtcID = crtc ?? conn.crtcID ?? (index < res.crtcs.count ? res.crtcs[index].id : res.crtcs.first?.id ?? 0)

        for step in allSteps {
            switch step {
            case .off:
                try card.disableCRTC(id: crtcID)
                say("vkms-modeset: off crtc \(crtcID) device \(device)")
            case .master:
                try card.acquireMaster()
                say("vkms-modeset: master device \(device)")
            case .on, .hertz, .clock:
                let timings: ModeTimings
                switch step {
                case .hertz(let hz): timings = .custom(width: width, height: height, hertz: hz)
                case .clock(let khz):
                    var t = ModeTimings.custom(width: width, height: height, hertz: 60)
                    t.clockKHz = khz
                    t.name = "\(width)x\(height)@\(khz)kHz"
                    timings = t
                default:
                    guard let preferred = conn.modes.first(where: \.isPreferred) ?? conn.modes.first else {
                        throw DRMError(kind: .other, errno: ENOENT, device: device, operation: "connector \(conn.name) has no modes; 'on'")
                    }
                    timings = preferred.timings
                }
                try card.setMode(crtcID: crtcID, connectorID: conn.id, timings: timings)
                let rate = timings.refreshRate
                say("vkms-modeset: mode \(timings.name) rate \(rate.map { Mode.hertzText($0.hertz) } ?? "0") Hz (\(rate?.description ?? "no refresh")) clock \(timings.clockKHz) kHz crtc \(crtcID) connector \(conn.name) device \(device)")
            }
            if dropMaster, step != .master { card.dropMaster() }
            if waitForSignal(signals, seconds: hold) {
                say("vkms-modeset: stopped")
                return
            }
        }
    }

    func say(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }

    /// Sleeps up to `seconds`; true if SIGTERM/SIGINT arrived.
    func waitForSignal(_ signals: sigset_t, seconds: Double) -> Bool {
        var set = signals
        let whole = seconds.rounded(.down)
        var timeout = timespec(tv_sec: Int(whole), tv_nsec: Int((seconds - whole) * 1e9))
        while true {
            let sig = sigtimedwait(&set, nil, &timeout)
            if sig > 0 { return true }
            if errno == EINTR { continue }  // (timeout is not updated; close enough for a helper)
            return false  // EAGAIN: held for the full time
        }
    }
}

VkmsModeset.main()
