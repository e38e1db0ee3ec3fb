import VsyncCore
import VsyncDRM

/// What a recording last wrote of one CRTC's variable refresh (trace version 2's `vrr-` lines):
/// a line is written when a value changes, so a trace holds each state once and each toggle.
struct RecordedVariableRefresh {
    private var capable: Bool?
    private var range: EDIDRefreshRange??
    private var enabled: Bool?
    private var enabledProperty: UInt32?
    private var connectorID: UInt32?

    /// Reads the connector's `vrr_capable` and EDID range (when the connector is new) and the
    /// CRTC's `VRR_ENABLED`, and writes the lines for what changed. Drivers without the
    /// properties (vkms) write `vrr-capable … 0` once and nothing more.
    mutating func update(card: Card, crtcID: UInt32, connectorID: UInt32?, display: UInt32, now: UInt64, emit: (String) -> Void) {
        if let connectorID, connectorID != self.connectorID {
            self.connectorID = connectorID
            let isCapable = card.variableRefreshCapable(connectorID: connectorID) ?? false
            if isCapable != capable {
                capable = isCapable
                emit(VBlankTrace.line(.variableRefreshCapable(timeNs: now, display: display, isCapable)))
            }
            let edid = card.edid(connectorID: connectorID)?.bytes
            let newRange = edid.flatMap { EDIDRefreshRange($0) }
            if range == nil || range! != newRange {
                range = .some(newRange)
                if isCapable || newRange != nil { emit(VBlankTrace.line(.refreshRange(timeNs: now, display: display, newRange))) }
            }
            enabledProperty = card.variableRefreshEnabledProperty(crtcID: crtcID)
        }
        pollEnabled(card: card, crtcID: crtcID, display: display, now: now, emit: emit)
    }

    /// The CRTC's `VRR_ENABLED` (no uevent when it changes): read after each vblank recorded.
    mutating func pollEnabled(card: Card, crtcID: UInt32, display: UInt32, now: UInt64, emit: (String) -> Void) {
        guard capable == true, let enabledProperty,
            let on = card.variableRefreshEnabled(crtcID: crtcID, property: enabledProperty), on != enabled
        else { return }
        enabled = on
        emit(VBlankTrace.line(.variableRefreshEnabled(timeNs: now, display: display, on)))
    }
}
