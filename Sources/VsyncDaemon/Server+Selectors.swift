import Logging
import VsyncCore

/// What a selector names among the displays there are now.
enum Resolution {
    case one(Display)
    /// More than one display matches: these, in the kernel's order.
    case ambiguous([Display])
    case none
}

// Selectors, the primary display, and keeping what clients are told true.
extension Server {
    /// Connectors built into the machine: the panel `primary` prefers while it is lit.
    static func isBuiltIn(_ connectorName: String) -> Bool {
        connectorName.hasPrefix("eDP-") || connectorName.hasPrefix("LVDS-") || connectorName.hasPrefix("DSI-")
    }

    /// Displays in the kernel's order: cards by number, then connectors in the card's order
    /// (`SourceDisplay.order`); found order (display id) breaks ties.
    var displaysInKernelOrder: [Display] {
        displays.sorted { ($0.source.order, $0.id) < ($1.source.order, $1.id) }
    }

    /// The primary display, as CADisplayLink's main screen: the built-in panel (eDP, LVDS, DSI)
    /// while it is lit, else the first lit display in the kernel's order; none while all are off.
    /// `among` narrows it to one card's displays.
    func primary(among candidates: [Display]? = nil) -> Display? {
        let lit = (candidates ?? displaysInKernelOrder).filter { $0.state == .on }
        return lit.first { Self.isBuiltIn($0.source.connectorName) } ?? lit.first
    }

    var primaryID: UInt32? { primary()?.id }

    func info(_ d: Display) -> DisplayInfo {
        d.info(isPrimary: d.id == primaryID, synthetic: source.isSynthetic)
    }

    /// The display `selector` names now. A CRTC id, connector name or EDID identity that more
    /// than one display has is refused with the names that tell them apart.
    func resolve(_ selector: DisplaySelector) -> Resolution {
        let matches: [Display]
        switch selector {
        case .primary: return primary().map(Resolution.one) ?? .none
        case .display(let id): return displays.first { $0.id == id }.map(Resolution.one) ?? .none
        case .crtc(let id): matches = displaysInKernelOrder.filter { $0.key.crtcID == id }
        case .connector(let name): matches = displaysInKernelOrder.filter { $0.source.connectorName == name }
        case .match(let m):
            let onCard = displaysInKernelOrder.filter { m.matches(info($0), pnpID: $0.source.edid?.pnpID ?? "") }
            if case .primary = m.target { return primary(among: onCard).map(Resolution.one) ?? .none }
            matches = onCard
        }
        guard matches.count > 1 else { return matches.first.map(Resolution.one) ?? .none }
        return .ambiguous(matches)
    }

    // What a refusal suggests is typed back by people and programs, so every selector it names
    // is one this daemon resolves to that display alone, in a form the client can send (card
    // and monitor selectors, kind 4, only with `cardSelectors`): each candidate is parsed and
    // resolved before it is offered, and `display:ID` is the form that always works.

    /// A selector that names `d` alone for a client with `features`: its connector on its card
    /// (with `cardSelectors`; its CRTC on its card first when `byCRTC`), else its connector
    /// name, else its display id.
    func selectorText(naming d: Display, features: ProtocolFeatures, byCRTC: Bool = false) -> String {
        let onCard = features.contains(.cardSelectors)
        let card = "@" + d.source.deviceName
        let byName = onCard ? d.source.connectorName + card : d.source.connectorName
        let crtc = "crtc:\(d.key.crtcID)" + card
        let candidates = onCard ? (byCRTC ? [crtc, byName] : [byName, crtc]) : [byName]
        for text in candidates {
            guard let selector = try? DisplaySelector.parse(text), selector.kind < 4 || onCard,
                case .one(let found) = resolve(selector), found === d
            else { continue }
            return text
        }
        return "display:\(d.id)"
    }

    /// The one line refusing a selector more than one display matches: each candidate named so
    /// that it works when sent back (`crtc:45@card1` with `cardSelectors`).
    func ambiguity(_ selector: DisplaySelector, _ matches: [Display], features: ProtocolFeatures) -> String {
        let byCRTC = if case .crtc = selector { true } else { false }
        let names = matches.map { selectorText(naming: $0, features: features, byCRTC: byCRTC) }
        return
            "\(selector.text) matches \(matches.count) displays (\(names.joined(separator: ", "))): name one, as in \(names[names.count - 1])"
    }

    /// "displays: A, B (vsync-probe list)" for a refusal whose own text takes `used` bytes: as
    /// many names as fit in an ERROR's text whole (a name cut short would not resolve).
    func displayNames(features: ProtocolFeatures, after used: Int) -> String {
        let names = displaysInKernelOrder.map { selectorText(naming: $0, features: features) }
        guard !names.isEmpty else { return "displays: none (vsync-probe list)" }
        var shown: [String] = []
        for (i, name) in names.enumerated() {
            let rest = names.count - i - 1
            let line = "displays: \((shown + [name]).joined(separator: ", "))\(rest > 0 ? " and \(rest) more" : "") (vsync-probe list)"
            guard used + line.utf8.count <= WireProtocol.maxTextSize else { break }
            shown.append(name)
        }
        guard !shown.isEmpty else { return "vsync-probe list shows the displays" }
        let more = names.count - shown.count
        return "displays: \(shown.joined(separator: ", "))\(more > 0 ? " and \(more) more" : "") (vsync-probe list)"
    }

    /// A SUBSCRIBE whose selector is outside the grammar (the wire's rules all kept): refused
    /// with unknownDisplay and the parser's line, the connection kept, as a selector that names
    /// nothing is. What would make the message malformed, or the id taken, is answered first
    /// (the codec has judged the rest of the wire, kind 4 before protocol 3 included).
    func refuseSelector(_ client: Client, id: UInt32, _ problem: String) {
        if id == 0 {
            return fail(
                client, .error(ErrorMessage(code: .malformed, message: "subscription id 0 is reserved")), reason: "subscription id 0")
        }
        if client.subscriptions[id] != nil || client.waiting[id] != nil {
            return send(
                ServerMessage.error(
                    ErrorMessage(code: .duplicateSubscription, subscriptionID: id, message: "subscription \(id) already exists")),
                to: client)
        }
        refreshDisplays()
        let text = problem + "; " + displayNames(features: client.features, after: problem.utf8.count + 2)
        send(ServerMessage.error(ErrorMessage(code: .unknownDisplay, subscriptionID: id, message: text)), to: client)
    }

    /// Re-reads every known display's CRTC (one ioctl each) and looks for new ones at most twice
    /// a second: what a client is about to be told or bound to is true now, even for displays
    /// nobody follows.
    func refreshDisplays() {
        let now = monotonicNow()
        for d in displays where displays.isListed(d) { recheck(d, now: now) }
        rescanIfStale()
        updatePrimary()
    }

    /// A hotplug uevent or a /dev/dri change: rescan now, and once more a moment later. The
    /// kernel sends the uevent before its fbdev client reacts to the hotplug (turning an
    /// unplugged connector's CRTC off, setting the card's others to its own mode), so the first
    /// rescan can read the CRTCs as they were; the second, 300 ms on, reads what fbdev did.
    func hotplugged() {
        source.hotplugged()
        rescanDisplays(announce: true)
        displays.rescanAgainAtNs = monotonicNow() &+ 300_000_000
    }

    /// Sends `message` encoded for the client's protocol version (display records grew in 3).
    func send(_ message: ServerMessage, to client: Client) {
        send(message.encoded(version: client.encodingVersion), to: client)
    }

    /// Notices a new primary display and moves the subscriptions that follow `primary` (also
    /// `@card`), for clients that follow it, to the display their selector names now: each gets
    /// SUBSCRIBED for its new display, then a `modeChanged` with that display's record. Older
    /// protocols stay on the display they were bound to, as they always did.
    func updatePrimary() {
        let now = primaryID
        guard now != displays.lastPrimaryID else { return }
        if let old = displays.lastPrimaryID, let new = now {
            logger.info("primary display: \(old) → \(new) (\(displays.first { $0.id == new }?.source.connectorName ?? "?"))")
        }
        displays.lastPrimaryID = now
        displays.changed = true
        for d in displays {
            for sub in d.subscriptions where sub.client.features.contains(.followingPrimary) && sub.followsPrimary {
                guard case .one(let target) = resolve(sub.selector), target !== d else { continue }
                move(sub, to: target)
            }
        }
    }

    private func move(_ sub: Subscription, to d: Display) {
        let client = sub.client
        logger.debug("client \(client.label): subscription \(sub.id) follows \(sub.selector.text) to display \(d.id)")
        detach(sub)
        updateVBlank(sub.display)
        attach(client, sub.request, to: d)
        send(ServerMessage.displayEvent(displayEvent(.modeChanged, d)), to: client)
    }

    /// The display is gone: subscriptions of clients that wait through a removal, named by
    /// something that can come back (a connector, `primary`, a card, an EDID), wait for it, as
    /// a SUBSCRIBE for a display not there yet does; the others end. Whether `sub` now waits.
    func keepWaiting(_ sub: Subscription) -> Bool {
        let client = sub.client
        guard client.features.contains(.waitingThroughRemoval), sub.selector.canAppearLater, client.closeReason == nil else { return false }
        client.waiting[sub.id] = sub.request
        return true
    }
}

extension Subscription {
    var followsPrimary: Bool {
        switch selector {
        case .primary: true
        case .match(let m): if case .primary = m.target { true } else { false }
        default: false
        }
    }
}
