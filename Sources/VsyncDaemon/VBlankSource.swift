import VsyncCore

/// Names one display (a CRTC on a card) across rescans.
struct DisplayKey: Hashable, Sendable, CustomStringConvertible {
    /// "/dev/dri/card0", or "timer".
    var device: String
    var crtcID: UInt32
    var description: String { "\(device) CRTC \(crtcID)" }
}

/// What a source knows about one display right now.
struct SourceDisplay: Equatable, Sendable {
    var key: DisplayKey
    var connectorID: UInt32
    var connectorName: String
    /// "card0", or "timer".
    var deviceName: String
    /// Has a mode (is lit).
    var isActive: Bool
    var refresh: RefreshRate?
    var width: UInt16
    var height: UInt16
    /// The card's stable path (`pci-0000:03:00.0`), "" when unknown.
    var busPath = ""
    /// The monitor's identity from the connector's EDID, if it has one.
    var edid: EDIDIdentity?
    /// Position in the kernel's order: card number, then the connector's index on the card
    /// (what `primary` falls back on).
    var order = 0
    /// `vrr_capable`, `VRR_ENABLED` and the EDID's range; nil when the source has no such thing.
    var variableRefresh: VariableRefreshState?

    /// Same mode as `other` (a change here is a modeChanged event).
    func sameMode(as other: SourceDisplay) -> Bool {
        refresh == other.refresh && width == other.width && height == other.height
    }
}

/// Why vblank events for a display stopped.
enum VBlankFailure: Error, Equatable, Sendable {
    /// The CRTC has no mode (EINVAL on the wait).
    case off
    /// The card went away (ENODEV).
    case gone
    case other(String)
}

/// Events name their display by the token the server gave `setActive`: its slot and the slot's
/// generation (`DisplaySlots`), so the server finds the display with one indexed load.
enum SourceEvent: Sendable {
    case vblank(token: UInt32, sequence: UInt64, timestampNs: UInt64)
    case failed(token: UInt32, VBlankFailure)
    /// The display's requests ran out while its events were wanted (the reader came late) and
    /// the re-arm queued afresh: the kernel may have turned the vblank interrupt off and on, and
    /// a driver whose vblank timer restarts on enable (vkms, virtio-gpu) then has a new phase.
    case requeued(token: UInt32)
    /// Cards may have come or gone (/dev/dri changed): rescan.
    case devicesChanged
}

/// Where vblanks come from: DRM (`DRMVBlankSource`) or a software clock (`TimerVBlankSource`).
///
/// Driven by the server's one epoll loop: the server polls `pollDescriptors`, calls
/// `readEvents(from:into:)` when one is readable, and turns events on per display only while a
/// subscriber is running (`setActive`). A source must never block.
protocol VBlankSource: AnyObject {
    /// Ticks come from a software clock, not a display.
    var isSynthetic: Bool { get }
    /// Descriptors to watch for EPOLLIN; may change after `rescan()`.
    var pollDescriptors: [Int32] { get }
    /// Every display there is now (opens new cards, drops gone ones).
    func rescan() -> [SourceDisplay]
    /// Re-reads one display (its CRTC's mode). Nil: it no longer exists.
    func refresh(_ key: DisplayKey) -> SourceDisplay?
    /// Starts or stops vblank events for a display; its events carry `token`. The source owns
    /// "wanted" (which displays are active) and "queued" (a request in flight) for each display.
    func setActive(_ key: DisplayKey, _ active: Bool, token: UInt32) throws(VBlankFailure)
    /// Vblank events are wanted for the display: set by `setActive`, cleared by the source itself
    /// when they fail (the failure is reported as an event). The server keeps no copy.
    func isActive(_ key: DisplayKey) -> Bool
    /// Reads what is ready on `fd` and appends it to `events`. A `.vblank` is only ever appended
    /// for an active display, with the token `setActive` gave it, so the server need not check.
    /// Appending into the caller's reused array keeps the per-vblank path free of allocation.
    func readEvents(from fd: Int32, into events: inout [SourceEvent])
    /// Re-arms what the last `readEvents` consumed: the next vblank of each display that just had
    /// one (DRM), or the timer. The server calls it once that read's ticks are sent, so the
    /// re-arm's syscalls are not on the path from vblank to client. Failures are appended, and
    /// `.requeued` for a display whose queue had run dry.
    func rearm(into events: inout [SourceEvent])
    /// Reads the display's `VRR_ENABLED` now (one property read, no re-read of the mode); nil
    /// when the source has no such property. The server polls it while someone follows.
    func variableRefreshEnabled(_ key: DisplayKey) -> Bool?
    /// A card is coming up (its node appeared before it could be opened): the server rescans at
    /// its housekeeping rate until it opens or the source gives up on it.
    var wantsRescanSoon: Bool { get }
    /// A hotplug happened: what the source cached of connectors (EDIDs) is read again.
    func hotplugged()
    /// Keeps at most `depth` vblank requests in flight for the display from the next top-up
    /// (nil: the source's own depth). A queued request cannot be cancelled and holds the
    /// interrupt on until its vblank, so sparse sampling keeps its bursts' queue short.
    func limitQueue(_ key: DisplayKey, to depth: Int?)
}

extension VBlankSource {
    func rearm(into events: inout [SourceEvent]) {}
    func variableRefreshEnabled(_ key: DisplayKey) -> Bool? { nil }
    /// Sources without cards (the timer, a replay) have none coming up.
    var wantsRescanSoon: Bool { false }
    func hotplugged() {}
    func limitQueue(_ key: DisplayKey, to depth: Int?) {}
}
