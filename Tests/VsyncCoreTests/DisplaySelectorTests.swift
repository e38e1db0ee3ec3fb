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
        ("edid:Foo@Bar/X@card2", .match(DisplayMatch(.edid(make: "Foo@Bar", model: "X", serial: ""), card: "card2"))),
        ("connector:HDMI-A-1@pci-0000:03:00.0", .match(DisplayMatch(.connector("HDMI-A-1"), card: "pci-0000:03:00.0"))),
        ("crtc:4294967295", .crtc(4_294_967_295)),
        ("timer@timer", .match(DisplayMatch(.connector("timer"), card: "timer"))),
    ])
    func parses(text: String, selector: DisplaySelector) throws {
        #expect(try DisplaySelector.parse(text) == selector)
        // The text form reads back as the same selector.
        #expect(try DisplaySelector.parse(selector.text) == selector)
    }

    @Test(arguments: ["", "crtc:", "crtc:0", "crtc:x@card1", "display:3@card1", "DP-1@", "edid:", "edid://",
                      String(repeating: "x", count: 33), String(repeating: "y", count: 129),
                      // Outside the grammar, not names of connectors that could appear.
                      "crtc:0@timer", "crtc:+5", "crtc:-1", "crtc:4294967296", "display:0", "bogus:1", "bogus:1@timer",
                      "connector:", "connector:a:b", "DP 1", "a@b@card0", "HDMI-A-1\n", "dp-1é"])
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
        // Kind 4 without its text is malformed (the field is cut).
        var short = Array(bytes.prefix(80)); short[2] = 80
        #expect(throws: WireError.self) { try ClientMessage.decode(short) }
    }

    /// A SUBSCRIBE at `size` bytes with `kind`, `selectorID`, `name` and, for kind 4, `text`.
    static func subscribe(kind: UInt8, id: UInt32 = 3, selectorID: UInt32 = 0, name: String = "", text: String = "",
                          size: Int? = nil) -> [UInt8] {
        var bytes = ClientMessage.subscribe(Subscribe(subscriptionID: id, selector: .primary, range: .default)).encoded()
        bytes[16] = kind
        withUnsafeBytes(of: selectorID.littleEndian) { bytes.replaceSubrange(20..<24, with: $0) }
        bytes.replaceSubrange(24..<(24 + name.utf8.count), with: Array(name.utf8))
        if kind == 4 { bytes += Array(text.utf8) + Array(repeating: 0, count: DisplaySelector.maxTextSize - text.utf8.count) }
        let total = size ?? bytes.count
        bytes = Array(bytes.prefix(total)) + Array(repeating: 0, count: max(0, total - bytes.count))
        bytes[2] = UInt8(total & 0xFF); bytes[3] = UInt8(total >> 8)
        return bytes
    }

    /// Kind 4 carries any selector's text, read as the form it is: the kinds are encodings.
    @Test(arguments: [("DP-1", DisplaySelector.connector("DP-1")), ("crtc:45", .crtc(45)), ("display:3", .display(3)),
                      ("primary", .primary), ("@card1", .match(DisplayMatch(.primary, card: "card1")))])
    func kind4CarriesAnySelector(text: String, selector: DisplaySelector) throws {
        guard case .subscribe(let s) = try ClientMessage.decode(Self.subscribe(kind: 4, text: text)) else {
            Issue.record("not a SUBSCRIBE"); return
        }
        #expect(s.selector == selector)
    }

    /// What kinds 0–3 spell (`crtc:ID`, `connector:NAME`, `display:ID`) is judged by the same
    /// grammar as text: outside it, the SUBSCRIBE is refused on its own (`badSelector`), not
    /// malformed.
    @Test func selectorsOutsideTheGrammarAreNotMalformed() throws {
        let cases: [[UInt8]] = [
            Self.subscribe(kind: 1, selectorID: 0), Self.subscribe(kind: 3, selectorID: 0),
            Self.subscribe(kind: 2, name: ""), Self.subscribe(kind: 2, name: "bogus:1"), Self.subscribe(kind: 2, name: "DP-1@card0"),
            Self.subscribe(kind: 4, text: "edid://"), Self.subscribe(kind: 4, text: "crtc:0@timer"), Self.subscribe(kind: 4, text: "bogus:1@timer"),
        ]
        for bytes in cases {
            do {
                _ = try ClientMessage.decode(bytes)
                Issue.record("kind \(bytes[16]) \(bytes[24..<40]) decoded")
            } catch {
                guard case .badSelector(let id, let message) = error else { Issue.record("\(error)"); continue }
                #expect(id == 3 && !message.isEmpty && !message.contains("\n"), "\(error)")
            }
        }
        // Kind 4 is version 3's: on an older connection it breaks the wire, whatever its text.
        for text in ["DP-1", "edid://"] {
            #expect(throws: WireError.invalidField("selector kind 4 needs protocol 3, this connection speaks 2")) {
                try ClientMessage.decode(Self.subscribe(kind: 4, text: text), version: 2)
            }
        }
        // A message that also breaks the wire is malformed: the wire is judged first.
        var nan = Self.subscribe(kind: 4, text: "edid://")
        withUnsafeBytes(of: Float.nan.bitPattern.littleEndian) { nan.replaceSubrange(56..<60, with: $0) }
        #expect(throws: WireError.self) { try ClientMessage.decode(nan) }
        do { _ = try ClientMessage.decode(nan) } catch { if case .badSelector = error { Issue.record("NaN range judged after the selector") } }
    }

    /// SUBSCRIBE's sizes by kind (PROTOCOL.md § 2): kinds 0–3 end at 80, so 81–207 bytes are
    /// longer than known; kind 4 ends at 208, so anything shorter cuts its text.
    @Test func subscribeSizesDependOnTheKind() throws {
        for size in [81, 100, 207, 208, 300] {
            #expect(throws: Never.self) { try ClientMessage.decode(Self.subscribe(kind: 2, name: "DP-1", size: size)) }
        }
        for size in [69, 79] {
            #expect(throws: WireError.self) { try ClientMessage.decode(Self.subscribe(kind: 0, size: size)) }
        }
        for size in [68, 80, 100, 207] {
            #expect(throws: WireError.self) { try ClientMessage.decode(Self.subscribe(kind: 4, text: "DP-1", size: size)) }
        }
        #expect(throws: Never.self) { try ClientMessage.decode(Self.subscribe(kind: 4, text: "DP-1", size: 300)) }
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
