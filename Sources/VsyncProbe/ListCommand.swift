import ArgumentParser
import VsyncCore
import VsyncDRM

/// `vsync-probe list`: every card, its connectors and CRTCs, each CRTC's exact refresh and
/// whether vblank works there.
struct ListCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "List DRM cards, connectors and CRTCs with their exact refresh and vblank status."
    )

    @Flag(help: "Print one JSON object.")
    var json = false

    @Option(help: "vsyncd socket for its timing quality and generations (default: $VSYNCD_SOCKET, else /run/vsyncd/vsyncd.sock).")
    var socket: String?

    struct CardInfo: Encodable {
        var path: String
        /// The card's stable path (`pci-0000:03:00.0`): select its displays with `@` + this.
        var busPath: String?
        var driver: String?
        var monotonic: Bool?
        var method: String?
        var error: String?
        var connectors: [ConnectorInfo] = []
        var crtcs: [CRTCInfo] = []
    }

    struct ConnectorInfo: Encodable {
        var id: UInt32
        var name: String
        var status: String
        var crtcId: UInt32?
        var modes: Int
        /// From the connector's EDID, as libdisplay-info (and so wlroots) derives them.
        var edidMake: String?
        var edidModel: String?
        var edidSerial: String?
        /// The connector's `vrr_capable` (false when the driver has no such property, as vkms),
        /// and the EDID's range limits in Hz (ListCommand+VariableRefresh.swift).
        var variableRefreshCapable = false
        var variableRefreshRangeHz: [UInt16]?
    }

    struct CRTCInfo: Encodable {
        var id: UInt32
        var pipe: Int
        var active: Bool
        var mode: String?
        var nominalHz: Double?
        var vrefresh: UInt32?
        var vblank: Bool
        var vblankError: String?
        /// From vsyncd, when it runs and drives this CRTC (ListCommand+Daemon.swift): the
        /// display's configuration generation, and its model's timing quality as `measure`
        /// reports a run's ("scanout" or "interrupt"; residual RMS and p99 in µs).
        var generation: UInt32?
        var timestampSource: String?
        var residualUs: MeasureReport.Residual?
        var residualSamples: UInt32?
        /// The CRTC's `VRR_ENABLED` (nil: no such property), and vsyncd's view: variable now.
        var variableRefreshEnabled: Bool?
        var variable: Bool?
        /// vsyncd's sparse sampling (protocol 6): the vblank interrupt sleeps now and ticks are
        /// model-timed; the largest phase correction its bursts made, µs.
        var modelTimed: Bool?
        var phaseCorrectionUs: Double?
    }

    struct Listing: Encodable { var cards: [CardInfo] }

    func run() throws {
        let paths = Card.primaryNodePaths()
        guard !paths.isEmpty else {
            throw Failure.exit(DRMError(kind: .noDevice, errno: 0, device: "/dev/dri", operation: "scan"))
        }
        let daemon = Self.daemonDisplays(socket: socket)
        let cards = paths.map { path in
            var card = Self.describe(path)
            let name = path.split(separator: "/").last.map(String.init) ?? path
            for i in card.crtcs.indices {
                if let d = daemon[Self.key(card: name, crtc: card.crtcs[i].id)] { Self.addDaemonView(d, to: &card.crtcs[i]) }
            }
            return card
        }
        if json {
            try Output.json(Listing(cards: cards))
        } else {
            cards.flatMap(Self.text).forEach(Output.line)
        }
        // Every card unreadable (e.g. permission denied): say what to do, fail.
        if cards.allSatisfy({ $0.error != nil }), let first = cards.first?.error {
            throw Failure.exit(first)
        }
    }

    static func describe(_ path: String) -> CardInfo {
        var info = CardInfo(path: path)
        do {
            let card = try Card(path: path)
            info.driver = card.driverName
            info.monotonic = card.hasMonotonicTimestamps
            info.method = card.vblankMethod.rawValue
            let res = try card.resources()
            let registry = PNPRegistry.installed()
            let bus = Card.busPath(ofNode: path)
            info.busPath = bus.isEmpty ? nil : bus
            info.connectors = res.connectors.map {
                let edid = card.edid(connectorID: $0.id)?.bytes.flatMap { EDIDIdentity($0, registry: registry) }
                var connector = ConnectorInfo(
                    id: $0.id, name: $0.name, status: $0.status.rawValue, crtcId: $0.crtcID, modes: $0.modes.count,
                    edidMake: edid?.make, edidModel: edid?.model, edidSerial: edid.map(\.serial))
                addVariableRefresh(card: card, to: &connector)
                return connector
            }
            info.crtcs = res.crtcs.map { crtc in
                var vblankError: String? = nil
                do { _ = try card.currentVBlank(crtc: crtc) } catch { vblankError = String(describing: error) }
                return CRTCInfo(
                    id: crtc.id, pipe: crtc.pipe, active: crtc.isActive, mode: crtc.mode?.name,
                    nominalHz: crtc.mode?.refreshRate?.hertz, vrefresh: crtc.mode?.timings.vrefresh,
                    vblank: vblankError == nil, vblankError: vblankError,
                    variableRefreshEnabled: card.variableRefreshEnabledProperty(crtcID: crtc.id)
                        .flatMap { card.variableRefreshEnabled(crtcID: crtc.id, property: $0) })
            }
        } catch {
            info.error = String(describing: error)
        }
        return info
    }

    static func text(_ card: CardInfo) -> [String] {
        guard card.error == nil, let driver = card.driver else {
            return ["\(card.path): \(card.error ?? "unreadable")"]
        }
        var lines = [
            "\(card.path)  driver \(driver), \(card.monotonic == true ? "monotonic" : "realtime") timestamps, vblank via \(card.method ?? "?")\(card.busPath.map { ", bus path \($0)" } ?? "")"
        ]
        for c in card.connectors {
            let edid = c.edidMake.map { make in ", EDID \(make)/\(c.edidModel ?? "")/\(c.edidSerial ?? "")" } ?? ""
            lines.append(
                "  connector \(c.id) \(c.name): \(c.status)\(c.crtcId.map { ", CRTC \($0)" } ?? ""), \(c.modes) modes\(edid), \(variableRefreshText(c))"
            )
        }
        for c in card.crtcs {
            let mode =
                c.mode.map { m in
                    "\(m) \(c.nominalHz.map(Mode.hertzText) ?? "?") Hz (vrefresh \(c.vrefresh ?? 0))"
                } ?? "no mode"
            let vblank = c.vblank ? "vblank ok" : "vblank: \(c.vblankError ?? "fails")"
            let vrr = c.variableRefreshEnabled == true ? ", VRR_ENABLED" : ""
            lines.append("  CRTC \(c.id) (pipe \(c.pipe)): \(c.active ? "active" : "off"), \(mode), \(vblank)\(vrr)\(daemonText(c))")
        }
        return lines
    }
}
