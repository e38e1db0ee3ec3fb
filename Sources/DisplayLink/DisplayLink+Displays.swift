import VsyncClientCore
import VsyncCore

// Which display: every display vsyncd has, with the names an app matches its window's output by
// (connector, the card's bus path, the EDID's make, model and serial), and the one a link is on.
extension DisplayLink {
    /// A display as vsyncd reports it (docs/PROTOCOL.md § 5): id, connector name, card and its
    /// stable bus path, EDID make, model and serial, mode and state.
    public typealias Display = DisplayInfo

    /// The display this link is on (``display`` resolved), as vsyncd last described it; nil
    /// before the daemon answered and while the link waits for its display.
    public var currentDisplay: Display? {
        withState { s in
            guard case .subscribed(let id) = s.subscription, let d = connection.subscription(id)?.display,
                d.displayID != 0
            else { return nil }
            return d
        }
    }

    /// The configuration generation of the link's display as vsyncd last described it (its
    /// `generation`; frames carry theirs in ``Frame/generation``); 0 before the daemon answered.
    public var displayGeneration: UInt32 { currentDisplay?.generation ?? 0 }

    /// Every display vsyncd has, to choose one before making a link: match a Wayland
    /// `wl_output`'s name or an X11 RandR output to `connectorName`, or a monitor to its EDID, and
    /// select it with ``DisplaySelector/parse(_:)`` (`"DP-1"`, `"edid:DEL/DELL U2720Q/ABC123"`,
    /// `"crtc:45@card1"`). One short connection of its own; throws the one-line error.
    public static func displays(socketPath: String? = nil, timeoutNanoseconds: UInt64 = 2_000_000_000) throws(DisplayLinkError) -> [Display]
    {
        let client = try VsyncClient(.init(socketPath: DisplayLinkConnection.resolvedPath(socketPath), clientName: "DisplayLink.displays"))
        return try client.listDisplays(timeoutNs: timeoutNanoseconds)
    }
}
