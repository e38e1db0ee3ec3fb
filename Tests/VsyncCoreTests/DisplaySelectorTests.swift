import Testing
import VsyncCore

/// The selector syntax (PROTOCOL.md § 4) and how protocol 3 carries it and the display's names.
@Suite("Display selectors and names")
struct DisplaySelectorTests {
    @Test(arguments: [
        ("primary", DisplaySelector.primary),
        ("display:4", .display(4)),
        ("crtc:45", .crtc(45)),
        ("DP-1", .connector("DP-1")),
        ("connector:HDMI-A-1", .connector("HDMI-A-1")),
        ("crtc:45@card1", .match(DisplayMatch(.crtc(45), card: "card1"))),
        ("DP-1@pci-0000:03:00.0", .match(DisplayMatch(.connector("DP-1"), card: "pci-0000:03:00.0"))),
        ("@card1", .match(DisplayMatch(.primary, card: "card1"))),
        ("primary@/dev/dri/by-path/platform-vkms-card", .match(DisplayMatch(.primary, card: "/dev/dri/by-path/platform-vkms-card"))),
        ("edid:Dell Inc./D1918H/2C8FJ8255K5E", .match(DisplayMatch(.edid(make: "Dell Inc.", model: "D1918H", serial: "2C8FJ8255K5E")))),
        ("edid:DEL", .match(DisplayMatch(.edid(make: "DEL", model: "", serial: "")))),
        ("edid://0x89ABCDEF@card0", .match(DisplayMatch(.edid(make: "", model: "", serial: "0x89ABCDEF"), card: "card0"))),
    ])
    func parses(text: String, selector: DisplaySelector) throws {
        #expect(try DisplaySelector.parse(text) == selector)
        // The text form reads back as the same selector.
        #expect(try DisplaySelector.parse(selector.text) == selector)
    }

    @Test(arguments: ["", "crtc:", "crtc:0", "crtc:x@card1", "display:3@card1", "DP-1@", "edid:", "edid://",
                      String(repeating: "x", count: 33), String(repeating: "y", count: 129)])
    func refusesWithOneLine(text: String) {
        #expect(throws: SelectorSyntaxError.self) { try DisplaySelector.parse(text) }
        do { _ = try DisplaySelector.parse(text) } catch {
            #expect(!error.message.contains("\n") && !error.message.isEmpty)
        }
    }

    @Test func cardsAreNamedByNodeBusPathOrLink() {
        for name in ["card1", "/dev/dri/card1", "pci-0000:03:00.0", "pci-0000:03:00.0-card", "/dev/dri/by-path/pci-0000:03:00.0-card"] {
            #expect(DisplayMatch.card(name, names: "card1", busPath: "pci-0000:03:00.0"), "\(name)")
        }
        #expect(!DisplayMatch.card("card10", names: "card1", busPath: "pci-0000:03:00.0"))
        #expect(!DisplayMatch.card("", names: "card1", busPath: ""))
    }

    @Test func matchesByEDIDMakeOrPNPIdModelAndSerial() {
        var info = sampleDisplay()
        info.edidMake = "Dell Inc."; info.edidModel = "D1918H"; info.edidSerial = "2C8FJ8255K5E"
        #expect(DisplayMatch(.edid(make: "DEL", model: "D1918H", serial: "")).matches(info, pnpID: "DEL"))
        #expect(DisplayMatch(.edid(make: "Dell Inc.", model: "", serial: "2C8FJ8255K5E")).matches(info, pnpID: "DEL"))
        #expect(!DisplayMatch(.edid(make: "", model: "D1918H", serial: "other")).matches(info, pnpID: "DEL"))
        #expect(!DisplayMatch(.edid(make: "DEL", model: "", serial: ""), card: "card1").matches(info, pnpID: "DEL"))
        // A connector without an EDID matches no EDID selector.
        #expect(!DisplayMatch(.edid(make: "", model: "", serial: "")).matches(sampleDisplay(), pnpID: ""))
    }

    /// Kind 4 carries the selector's text after the 80 bytes; other kinds keep their 80 bytes.
    @Test func subscribeWithAMatchRoundTrips() throws {
        let match = Subscribe(subscriptionID: 9, selector: .match(DisplayMatch(.crtc(45), card: "card1")), range: .default, workDurationNs: 4_000_000)
        let bytes = ClientMessage.subscribe(match).encoded()
        #expect(bytes.count == Subscribe.matchWireSize && bytes[16] == 4)
        #expect(Array(bytes[80..<93]) == Array("crtc:45@card1".utf8))
        #expect(try ClientMessage.decode(bytes) == .subscribe(match))
        #expect(ClientMessage.subscribe(Subscribe(subscriptionID: 1, selector: .crtc(45), range: .default)).encoded().count == 80)
        // Kind 4 without its text, or with a text that is not a kind-4 selector, is malformed.
        var short = Array(bytes.prefix(80)); short[2] = 80
        #expect(throws: WireError.self) { try ClientMessage.decode(short) }
        var plain = bytes
        for i in 80..<bytes.count { plain[i] = 0 }
        plain.replaceSubrange(80..<84, with: Array("DP-1".utf8))
        #expect(throws: WireError.self) { try ClientMessage.decode(plain) }
    }

    /// Protocol 3 records are 224 bytes: the names at fixed offsets after the 96 of protocol 2,
    /// which older connections still get.
    @Test func version3RecordsCarryTheNames() throws {
        var d = sampleDisplay()
        d.busPath = "pci-0000:03:00.0"; d.edidMake = "Dell Inc."; d.edidModel = "D1918H"; d.edidSerial = "2C8FJ8255K5E"
        let message = ServerMessage.subscribed(Subscribed(subscriptionID: 1, displayID: 7, divisor: 1, displayIntervalNs: 1, clientIntervalNs: 1, display: d))
        let v3 = message.encoded(version: 3)
        #expect(v3.count == 40 + DisplayInfo.version3WireSize)
        #expect(Array(v3[(40 + 96)..<(40 + 112)]) == Array("pci-0000:03:00.0".utf8))
        #expect(Array(v3[(40 + 160)..<(40 + 169)]) == Array("Dell Inc.".utf8))
        #expect(Array(v3[(40 + 192)..<(40 + 198)]) == Array("D1918H".utf8))
        #expect(Array(v3[(40 + 208)..<(40 + 220)]) == Array("2C8FJ8255K5E".utf8))
        #expect(try ServerMessage.decode(v3) == message)
        let v2 = message.encoded(version: 2)
        #expect(v2.count == 136 && Array(v3.prefix(4))[0...1] == v2[0...1])
        var plain = d
        plain.busPath = ""; plain.edidMake = ""; plain.edidModel = ""; plain.edidSerial = ""
        guard case .subscribed(let old)? = try ServerMessage.decode(v2) else { Issue.record("not decoded"); return }
        #expect(old.display == plain)
        let list = ServerMessage.displayList([d, d]).encoded(version: 3)
        #expect(list[12] == 224 && list.count == 16 + 2 * 224)
        #expect(try ServerMessage.decode(list) == .displayList([d, d]))
    }
}
