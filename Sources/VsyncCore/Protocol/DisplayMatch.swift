/// A display named by what stays true of it across restarts, ports and cards (protocol 3): a
/// connector name, a CRTC or the primary display on a given card, or a monitor's EDID identity.
/// Its text form is the selector syntax of docs/PROTOCOL.md § 4 (`DisplaySelector.parse`), and
/// the wire carries that text (SUBSCRIBE selector kind 4).
public struct DisplayMatch: Sendable, Hashable {
    public enum Target: Sendable, Hashable {
        /// The primary display (of the card, when one is named).
        case primary
        case crtc(UInt32)
        case connector(String)
        /// EDID make (manufacturer name or PNP id), model and serial; "" matches any.
        case edid(make: String, model: String, serial: String)
    }

    public var target: Target
    /// The card: its node name (`card1`), node path (`/dev/dri/card1`), bus path
    /// (`pci-0000:03:00.0`) or by-path link (`/dev/dri/by-path/pci-0000:03:00.0-card`); nil, any.
    public var card: String?

    public init(_ target: Target, card: String? = nil) {
        self.target = target
        self.card = card
    }

    /// The selector text, e.g. `crtc:45@card1`, `edid:Dell Inc./D1918H/2C8FJ8255K5E`.
    public var text: String {
        let head: String
        switch target {
        case .primary: head = card == nil ? "primary" : ""
        case .crtc(let id): head = "crtc:" + String(id)
        case .connector(let name): head = "connector:" + name
        case let .edid(make, model, serial):
            var parts = [make, model, serial]
            while parts.count > 1 && parts[parts.count - 1].isEmpty { parts.removeLast() }
            head = "edid:" + parts.joined(separator: "/")
        }
        guard let card else { return head }
        return head + "@" + card
    }

    /// Whether `card` names the device `deviceName` (`card1`) whose bus path is `busPath`.
    public static func card(_ card: String, names deviceName: String, busPath: String) -> Bool {
        if card == deviceName || card == "/dev/dri/" + deviceName { return true }
        guard !busPath.isEmpty else { return false }
        return card == busPath || card == busPath + "-card" || card == "/dev/dri/by-path/" + busPath + "-card"
    }

    /// Whether the display `info` (whose EDID PNP id is `pnpID`, "" without an EDID) is one this
    /// names. `.primary` is decided by the daemon, so here it only checks the card.
    public func matches(_ info: DisplayInfo, pnpID: String) -> Bool {
        if let card, !Self.card(card, names: info.deviceName, busPath: info.busPath) { return false }
        switch target {
        case .primary: return true
        case .crtc(let id): return info.crtcID == id
        case .connector(let name): return info.connectorName == name
        case let .edid(make, model, serial):
            guard !info.edidMake.isEmpty || !info.edidModel.isEmpty else { return false }
            if !make.isEmpty && make != info.edidMake && make != pnpID { return false }
            if !model.isEmpty && model != info.edidModel { return false }
            if !serial.isEmpty && serial != info.edidSerial { return false }
            return true
        }
    }
}

/// A selector text that does not parse; `message` says what is wrong and what to write.
public struct SelectorSyntaxError: Error, Sendable, Equatable {
    public var message: String
    public init(_ message: String) { self.message = message }
}

extension DisplaySelector {
    /// The longest selector text SUBSCRIBE carries (kind 4).
    public static let maxTextSize = 128

    /// Parses the selector syntax (docs/PROTOCOL.md § 4), shared by vsync-probe, DisplayLink and
    /// libvsync so that every client reads it alike:
    /// `primary`, `display:ID`, `crtc:ID`, a connector name (`DP-1`, or `connector:DP-1`),
    /// `edid:MAKE/MODEL/SERIAL` (trailing parts may be left out, an empty part matches any), and
    /// any of primary, `crtc:ID`, a connector or `edid:` followed by `@CARD`; `@CARD` alone is
    /// that card's primary display. The forms of protocol 1 come back as their own cases, so an
    /// older daemon still understands them; the others as `.match`.
    public static func parse(_ text: String) throws(SelectorSyntaxError) -> DisplaySelector {
        guard !text.isEmpty else { throw SelectorSyntaxError("the display selector is empty: use primary, a connector name such as DP-1, crtc:ID@CARD, display:ID or edid:MAKE/MODEL/SERIAL") }
        guard text.utf8.count <= maxTextSize else { throw SelectorSyntaxError("display selector of \(text.utf8.count) bytes: at most \(maxTextSize)") }
        var head = Substring(text)
        var card: String?
        // The card is after the last '@' (bus paths have none; a model name might).
        if let at = text.lastIndex(of: "@") {
            let name = String(text[text.index(after: at)...])
            guard !name.isEmpty else { throw SelectorSyntaxError("'\(text)' names no card after '@': write e.g. crtc:45@card1 or DP-1@pci-0000:03:00.0") }
            card = name
            head = text[..<at]
        }
        let target: DisplayMatch.Target
        if head.isEmpty || head == "primary" {
            target = .primary
        } else if head.hasPrefix("display:") {
            guard card == nil else { throw SelectorSyntaxError("'\(text)': a display id names one display already; drop the @card") }
            return .display(try number(head.dropFirst(8), text))
        } else if head.hasPrefix("crtc:") {
            target = .crtc(try number(head.dropFirst(5), text))
        } else if head.hasPrefix("edid:") {
            let parts = head.dropFirst(5).split(separator: "/", maxSplits: 2, omittingEmptySubsequences: false).map(String.init)
            guard parts.contains(where: { !$0.isEmpty }) else {
                throw SelectorSyntaxError("'\(text)' matches every monitor: give edid:MAKE/MODEL/SERIAL, e.g. edid:Dell Inc./D1918H (vsync-probe list shows them)")
            }
            target = .edid(make: parts[0], model: parts.count > 1 ? parts[1] : "", serial: parts.count > 2 ? parts[2] : "")
        } else {
            let name = head.hasPrefix("connector:") ? String(head.dropFirst(10)) : String(head)
            guard !name.isEmpty, name.utf8.count <= WireProtocol.nameSize else {
                throw SelectorSyntaxError("'\(text)': a connector name has 1 to \(WireProtocol.nameSize) bytes")
            }
            target = .connector(name)
        }
        guard let card else {
            switch target {
            case .primary: return .primary
            case .crtc(let id): return .crtc(id)
            case .connector(let name): return .connector(name)
            case .edid: return .match(DisplayMatch(target))
            }
        }
        return .match(DisplayMatch(target, card: card))
    }

    private static func number(_ digits: Substring, _ text: String) throws(SelectorSyntaxError) -> UInt32 {
        guard let n = UInt32(digits), n > 0 else { throw SelectorSyntaxError("'\(text)': expected a number above 0 after the colon") }
        return n
    }

    /// The selector in the syntax `parse` reads.
    public var text: String {
        switch self {
        case .primary: "primary"
        case .crtc(let id): "crtc:" + String(id)
        case .connector(let name): name
        case .display(let id): "display:" + String(id)
        case .match(let m): m.text
        }
    }
}
