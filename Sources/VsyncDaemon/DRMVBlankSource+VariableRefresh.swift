import VsyncCore
import VsyncDRM

// Variable refresh as DRM tells it, without master: the connector's vrr_capable and EDID
// range (read with its identity, when a monitor is plugged or swapped) and the CRTC's
// VRR_ENABLED (read at each re-read of the CRTC, and polled by the server while followed).
extension DRMVBlankSource {
    /// Nil when the driver has neither property (no VRR: vkms).
    func variableRefreshState(_ key: DisplayKey) -> VariableRefreshState? {
        guard let c = connectors[key], c.variableRefreshCapable != nil || c.enabledProperty != nil else { return nil }
        return VariableRefreshState(
            capable: c.variableRefreshCapable ?? false,
            enabled: variableRefreshEnabled(key) ?? false, range: c.refreshRange)
    }

    func variableRefreshEnabled(_ key: DisplayKey) -> Bool? {
        guard let property = connectors[key]?.enabledProperty, let card = cards[key.device]?.card else { return nil }
        return card.variableRefreshEnabled(crtcID: key.crtcID, property: property)
    }
}
