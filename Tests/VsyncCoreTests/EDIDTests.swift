import Testing
@testable import VsyncCore

/// The EDID base block fields vsyncd names monitors by, read with libdisplay-info's rules.
@Suite("EDID identity")
struct EDIDTests {
    static func bytes(_ hex: String) -> [UInt8] {
        hex.split(whereSeparator: { $0 == " " || $0 == "\n" }).map { UInt8($0, radix: 16)! }
    }

    /// A Dell D1918H over HDMI, from the linuxhw/EDID collection of EDIDs users uploaded
    /// (github.com/linuxhw/EDID, Digital/Dell/DEL2005/0771A94A1DAD; edid-decode there reads
    /// manufacturer DEL, product name 'D1918H', and a serial number descriptor). Base block and
    /// its CTA-861 extension, as the connector's EDID property holds them.
    static let dellD1918H = bytes("""
        00 ff ff ff ff ff ff 00 10 ac 05 20 01 01 01 01 06 1c 01 03 80 29 17 78 2a eb c5 a2 57 54 a0 27
        0c 50 54 a5 4b 00 01 01 01 01 01 01 01 01 01 01 01 01 01 01 01 01 66 21 56 aa 51 00 1e 30 46 8f
        33 00 9a e6 10 00 00 1e 00 00 00 ff 00 32 43 38 46 4a 38 32 35 35 4b 35 45 0a 00 00 00 fc 00 44
        31 39 31 38 48 0a 20 20 20 20 20 20 00 00 00 fd 00 38 4b 1e 53 09 00 0a 20 20 20 20 20 20 01 80
        02 03 1f f0 4c 10 04 13 03 02 12 11 07 06 16 15 01 23 09 07 01 83 01 00 00 65 03 0c 00 10 00 02
        3a 80 18 71 38 2d 40 58 2c 45 00 9a e6 10 00 00 1f 01 1d 00 72 51 d0 1e 20 6e 28 55 00 9a e6 10
        00 00 1f 01 1d 00 bc 52 d0 1e 20 b8 28 55 40 9a e6 10 00 00 1e 8c 0a d0 8a 20 e0 2d 10 10 3e 96
        00 9a e6 10 00 00 18 8c 0a d0 90 20 40 31 20 0c 40 55 00 9a e6 10 00 00 18 00 00 00 00 00 00 eb
        """)

    /// Written here from the E-EDID 1.4 layout: PNP id "ZZZ" (no registry entry), product code
    /// 0x1234, serial number 0x89ABCDEF, and no name or serial descriptors, so every field falls
    /// back to its number as libdisplay-info prints it. The checksum is computed.
    static func bare(pnp: (UInt8, UInt8) = (0x6B, 0x5A), serial: [UInt8] = [0xEF, 0xCD, 0xAB, 0x89]) -> [UInt8] {
        var e = [UInt8](repeating: 0, count: 128)
        e[0..<8] = [0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x00]
        e[8] = pnp.0; e[9] = pnp.1  // Z Z Z: 26 in each 5-bit letter = 0b0_11010_11010_11010
        e[10] = 0x34; e[11] = 0x12
        e[12..<16] = ArraySlice(serial)
        e[18] = 1; e[19] = 4
        // One detailed timing (not a display descriptor) and a dummy descriptor (tag 0x10).
        e[54] = 0x01; e[55] = 0x1D
        e[75] = 0x10
        e[127] = UInt8(truncatingIfNeeded: 256 - Int(e[0..<127].reduce(0) { $0 &+ $1 }))
        return e
    }

    @Test func aRealMonitorGivesMakeModelAndSerialStrings() throws {
        let id = try #require(EDIDIdentity(Self.dellD1918H))
        #expect(id.pnpID == "DEL" && id.productCode == 0x2005 && id.serialNumber == 0x0101_0101)
        #expect(id.make == "Dell Inc.")
        #expect(id.model == "D1918H")
        // The serial string descriptor wins over the number, as in libdisplay-info.
        #expect(id.serial == "2C8FJ8255K5E")
    }

    @Test func withoutDescriptorsTheNumbersStandIn() throws {
        let id = try #require(EDIDIdentity(Self.bare()))
        #expect(id.pnpID == "ZZZ")
        #expect(id.make == "PNP(ZZZ)")
        #expect(id.model == "0x1234")
        #expect(id.serial == "0x89ABCDEF")
        let noSerial = try #require(EDIDIdentity(Self.bare(serial: [0, 0, 0, 0])))
        #expect(noSerial.serial == "")
    }

    @Test func theRegistryNamesTheMaker() throws {
        let registry = PNPRegistry.parse("# comment\nZZZ\tZed Displays Ltd\r\nDE\tshort id\nABCD\tlong id\n")
        #expect(registry.count == 1)
        #expect(try #require(EDIDIdentity(Self.bare(), registry: registry)).make == "Zed Displays Ltd")
        // hwdata's file over the built-in table: its entries win, the table's others stay.
        let merged = PNPRegistry.builtIn.merging(PNPRegistry(["DEL": "Dell (hwdata)"]))
        #expect(merged.name(for: "DEL") == "Dell (hwdata)" && merged.name(for: "SAM") == "Samsung Electric Company")
    }

    @Test func notAnEDIDIsNil() {
        var bad = Self.dellD1918H
        bad[20] ^= 0x01  // checksum no longer sums to 0
        #expect(EDIDIdentity(bad) == nil)
        #expect(EDIDIdentity(Array(Self.dellD1918H.prefix(127))) == nil)
        var header = Self.bare()
        header[0] = 0x01
        #expect(EDIDIdentity(header) == nil)
        #expect(EDIDIdentity(Self.bare(pnp: (0, 0))) == nil, "letter 0 is not a PNP letter")
    }

    @Test func descriptorTextEndsAtLineFeedAndEscapesControlBytes() {
        #expect(EDIDIdentity.descriptorText(ArraySlice(Array("D1918H".utf8) + [0x0A, 0x20, 0x20])) == "D1918H")
        #expect(EDIDIdentity.descriptorText(ArraySlice(Array("AB  ".utf8))) == "AB")
        #expect(EDIDIdentity.descriptorText([0x41, 0x01, 0x42]) == "A\\x01B")
    }
}
