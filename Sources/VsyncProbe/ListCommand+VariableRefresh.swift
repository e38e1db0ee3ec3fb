import VsyncCore
import VsyncDRM

// `vsync-probe list`'s variable refresh (VRR): the connector's vrr_capable and the EDID's range
// limits, read as vsyncd reads them (without DRM master).
extension ListCommand {
    static func addVariableRefresh(card: Card, to connector: inout ConnectorInfo) {
        connector.variableRefreshCapable = card.variableRefreshCapable(connectorID: connector.id) ?? false
        if let range = card.edid(connectorID: connector.id)?.bytes.flatMap({ EDIDRefreshRange($0) }) {
            connector.variableRefreshRangeHz = [range.minimumHz, range.maximumHz]
        }
    }

    /// "variable refresh: not capable", or "variable refresh: capable, 48-144 Hz".
    static func variableRefreshText(_ c: ConnectorInfo) -> String {
        guard c.variableRefreshCapable else { return "variable refresh: not capable" }
        let range = c.variableRefreshRangeHz.map { ", \($0[0])-\($0[1]) Hz" } ?? ", range unknown"
        return "variable refresh: capable\(range)"
    }
}
