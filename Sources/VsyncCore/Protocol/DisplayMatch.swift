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
        case .edid(let make, let model, let serial):
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
        case .edid(let make, let model, let serial):
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

    /// Parses the selector syntax (docs/PROTOCOL.md § 4), shared by vsyncd, vsync-probe,
    /// DisplayLink and libvsync so that every side reads it alike:
    ///
    ///     selector  = "display:" ID | head [ "@" CARD ]
    ///     head      = "" | "primary" | "crtc:" ID | "connector:" NAME | NAME | "edid:" MAKE [ "/" MODEL [ "/" SERIAL ] ]
    ///
    /// ID is decimal digits naming 1 to 2³² − 1; NAME is the kernel's connector name (ASCII
    /// letters, digits, `-`, `_`, `.`; 1 to 32 bytes); CARD is everything after the last `@`
    /// (not empty); an EDID part may be empty (it matches anything), but not all three. Any
    /// other head with a `:` is no form at all, not a connector name, so a typo is an error
    /// rather than a wait for a display that can never come. `@CARD` alone is that card's
    /// primary display. The forms of protocol 1 come back as their own cases, so an older
    /// daemon still understands them; the others as `.match`.
    public static func parse(_ text: String) throws(SelectorSyntaxError) -> DisplaySelector {
        guard !text.isEmpty else {
            throw SelectorSyntaxError(
                "the display selector is empty: use primary, a connector name such as DP-1, crtc:ID@CARD, display:ID or edid:MAKE/MODEL/SERIAL"
            )
        }
        guard text.utf8.count <= maxTextSize else {
            throw SelectorSyntaxError("display selector of \(text.utf8.count) bytes: at most \(maxTextSize)")
        }
        // Echoed in one-line errors: a control character must not break the line.
        let shown = printable(text)
        var head = Substring(text)
        var card: String?
        // The card is after the last '@' (bus paths have none; a model name might).
        if let at = text.lastIndex(of: "@") {
            let name = String(text[text.index(after: at)...])
            guard !name.isEmpty else {
                throw SelectorSyntaxError(
                    "'\(shown)' names no card after '@': write NAME@CARD, crtc:ID@CARD or @CARD, CARD as vsync-probe list shows it")
            }
            card = name
            head = text[..<at]
        }
        let target: DisplayMatch.Target
        if head.isEmpty || head == "primary" {
            target = .primary
        } else if head.hasPrefix("display:") {
            guard card == nil else { throw SelectorSyntaxError("'\(shown)': a display id names one display already; drop the @card") }
            return .display(try number(head.dropFirst(8), shown))
        } else if head.hasPrefix("crtc:") {
            target = .crtc(try number(head.dropFirst(5), shown))
        } else if head.hasPrefix("edid:") {
            let parts = head.dropFirst(5).split(separator: "/", maxSplits: 2, omittingEmptySubsequences: false).map(String.init)
            guard parts.contains(where: { !$0.isEmpty }) else {
                throw SelectorSyntaxError(
                    "'\(shown)' matches every monitor: give at least one of edid:MAKE/MODEL/SERIAL (vsync-probe list shows them)")
            }
            target = .edid(make: parts[0], model: parts.count > 1 ? parts[1] : "", serial: parts.count > 2 ? parts[2] : "")
        } else if head.hasPrefix("connector:") {
            target = .connector(try connectorName(head.dropFirst(10), shown))
        } else if let colon = head.firstIndex(of: ":") {
            throw SelectorSyntaxError(
                "'\(shown)': '\(Self.printable(head[...colon]))' is no selector form: use primary, crtc:ID, display:ID, connector:NAME, edid:MAKE/MODEL/SERIAL or a connector name such as DP-1"
            )
        } else {
            target = .connector(try connectorName(head, shown))
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

    /// Checks a selector SUBSCRIBE spelled with kind 0–3's fields against the same grammar:
    /// kind 1 is `crtc:ID`, kind 2 `connector:NAME`, kind 3 `display:ID`. A kind 4 selector
    /// comes from `parse` already.
    public func checked() throws(SelectorSyntaxError) -> DisplaySelector {
        switch self {
        case .primary, .match: return self
        case .crtc(let id): return .crtc(try Self.number(Substring(String(id)), "crtc:" + String(id)))
        case .display(let id): return .display(try Self.number(Substring(String(id)), "display:" + String(id)))
        case .connector(let name): return .connector(try Self.connectorName(Substring(name), "connector:" + Self.printable(name)))
        }
    }

    /// `text` with control characters as '?', for an error line.
    private static func printable(_ text: some StringProtocol) -> String {
        var out = String.UnicodeScalarView()
        for c in text.unicodeScalars { out.append(c.value < 0x20 || c.value == 0x7F ? "?" : c) }
        return String(out)
    }

    private static func number(_ digits: Substring, _ text: String) throws(SelectorSyntaxError) -> UInt32 {
        guard !digits.isEmpty, digits.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let n = UInt32(digits), n > 0 else {
            throw SelectorSyntaxError(
                "'\(text)': expected a number above 0 after the colon (decimal digits, at most 4294967295; vsync-probe list shows the ids)")
        }
        return n
    }

    /// The kernel names connectors TYPE-N (`DP-1`, `HDMI-A-1`, `eDP-1`, `Virtual-1`).
    private static func connectorName(_ name: Substring, _ text: String) throws(SelectorSyntaxError) -> String {
        func allowed(_ b: UInt8) -> Bool {
            (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || b == 0x2D || b == 0x5F || b == 0x2E
        }
        guard !name.isEmpty, name.utf8.count <= WireProtocol.nameSize, name.utf8.allSatisfy(allowed) else {
            throw SelectorSyntaxError(
                "'\(text)': a connector name is 1 to \(WireProtocol.nameSize) ASCII letters, digits, '-', '_' or '.', as the kernel names them (DP-1, HDMI-A-1; vsync-probe list shows them)"
            )
        }
        return String(name)
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
