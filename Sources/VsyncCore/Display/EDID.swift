/// The identity an EDID's base block gives a monitor: make, model and serial, as compositors
/// show them (wl_output's make and model, the output description) and as a RandR client can read
/// them from an output's `EDID` property.
///
/// Why not libdisplay-info, the field's parser: Debian bookworm has it only in backports, and
/// vsyncd needs four fields of the 128-byte base block, no timings and no extensions. This reads
/// them with libdisplay-info's rules (`di_info_get_make`, `_model`, `_serial`), so the strings are
/// the ones wlroots (0.17+) puts in wl_output: make from the PNP id through the PNP registry, else
/// `PNP(XXX)`; model from the product name descriptor, else the product code as `0x%04X`; serial
/// from the serial string descriptor, else the serial number as `0x%08X` when it is not 0.
/// Pure: it is handed the blob (the connector's `EDID` property, read by VsyncDRM).
public struct EDIDIdentity: Sendable, Hashable {
    /// The three-letter PNP manufacturer id, e.g. "DEL".
    public var pnpID: String
    public var productCode: UInt16
    public var serialNumber: UInt32
    /// The display product name descriptor (tag 0xFC), if there is one.
    public var productName: String?
    /// The display product serial number descriptor (tag 0xFF), if there is one.
    public var serialText: String?
    /// The manufacturer's name from the PNP registry, when known (`PNPRegistry`).
    public var manufacturerName: String?

    public init(
        pnpID: String, productCode: UInt16, serialNumber: UInt32, productName: String?, serialText: String?, manufacturerName: String?
    ) {
        self.pnpID = pnpID
        self.productCode = productCode
        self.serialNumber = serialNumber
        self.productName = productName
        self.serialText = serialText
        self.manufacturerName = manufacturerName
    }

    /// Parses the base block of `edid` (at least 128 bytes, the fixed header, a checksum that
    /// sums to 0). Nil for anything else: a connector without a monitor, a corrupt read.
    public init?(_ edid: [UInt8], registry: PNPRegistry = .builtIn) {
        guard edid.count >= 128, Array(edid[0..<8]) == [0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x00] else { return nil }
        var sum: UInt8 = 0
        for b in edid[0..<128] { sum &+= b }
        guard sum == 0 else { return nil }
        // Three 5-bit letters, 'A' = 1, big-endian in bytes 8–9.
        let packed = UInt16(edid[8]) << 8 | UInt16(edid[9])
        var letters = ""
        for shift in [10, 5, 0] as [UInt16] {
            let v = (packed >> shift) & 0x1F
            guard v >= 1 && v <= 26 else { return nil }
            letters.unicodeScalars.append(Unicode.Scalar(UInt8(64 + v)))
        }
        pnpID = letters
        productCode = UInt16(edid[10]) | UInt16(edid[11]) << 8
        serialNumber = UInt32(edid[12]) | UInt32(edid[13]) << 8 | UInt32(edid[14]) << 16 | UInt32(edid[15]) << 24
        // Four 18-byte descriptors at 54; a display descriptor starts 00 00 00 TAG 00.
        for start in stride(from: 54, to: 126, by: 18) where edid[start] == 0 && edid[start + 1] == 0 && edid[start + 2] == 0 {
            let tag = edid[start + 3]
            guard tag == 0xFC || tag == 0xFF else { continue }
            let text = Self.descriptorText(edid[(start + 5)..<(start + 18)])
            guard !text.isEmpty else { continue }
            if tag == 0xFC, productName == nil { productName = text }
            if tag == 0xFF, serialText == nil { serialText = text }
        }
        manufacturerName = registry.name(for: letters)
    }

    /// `Dell Inc.`, or `PNP(XXX)` for an id the registry does not know.
    public var make: String { manufacturerName ?? "PNP(\(pnpID))" }
    /// The product name, else the product code as `0x%04X`.
    public var model: String { productName ?? "0x" + Self.hex(UInt64(productCode), digits: 4) }
    /// The serial string, else the serial number as `0x%08X`; empty when neither is set.
    public var serial: String {
        if let serialText { return serialText }
        return serialNumber == 0 ? "" : "0x" + Self.hex(UInt64(serialNumber), digits: 8)
    }

    /// Descriptor text: up to 13 bytes, ended by a line feed, padded with spaces (trimmed);
    /// bytes outside printable ASCII written as `\xNN`, as libdisplay-info does.
    static func descriptorText(_ bytes: ArraySlice<UInt8>) -> String {
        var out = ""
        for b in bytes {
            if b == 0x0A { break }
            if b >= 0x20 && b < 0x7F {
                out.unicodeScalars.append(Unicode.Scalar(b))
            } else {
                out += "\\x" + hex(UInt64(b), digits: 2).lowercased()
            }
        }
        while out.hasSuffix(" ") { out.removeLast() }
        return out
    }

    static func hex(_ v: UInt64, digits: Int) -> String {
        let s = String(v, radix: 16, uppercase: true)
        return String(repeating: "0", count: max(0, digits - s.count)) + s
    }
}

/// PNP manufacturer ids to names. The full registry is hwdata's `pnp.ids` (the daemon loads it
/// with `parse` where it is installed); the built-in table holds the common monitor and panel
/// makers, with hwdata's spelling, so names match without it.
public struct PNPRegistry: Sendable {
    private var names: [String: String]

    public init(_ names: [String: String]) { self.names = names }

    public func name(for id: String) -> String? { names[id] }

    /// This registry with the entries of `other` added (they win).
    public func merging(_ other: PNPRegistry) -> PNPRegistry {
        PNPRegistry(names.merging(other.names) { _, new in new })
    }

    public var count: Int { names.count }

    /// hwdata's `pnp.ids`: one `ID<TAB>Name` per line; other lines are skipped.
    public static func parse(_ text: String) -> PNPRegistry {
        var names: [String: String] = [:]
        for line in text.split(whereSeparator: \.isNewline) {
            let parts = line.split(separator: "\t", maxSplits: 1)
            guard parts.count == 2, parts[0].count == 3 else { continue }
            var name = String(parts[1])
            while name.hasSuffix(" ") || name.hasSuffix("\r") { name.removeLast() }
            if !name.isEmpty { names[String(parts[0])] = name }
        }
        return PNPRegistry(names)
    }

    public static let builtIn = PNPRegistry([
        "ACR": "Acer Technologies", "APP": "Apple Computer Inc", "AUS": "ASUSTek COMPUTER INC",
        "BNQ": "BenQ Corporation", "CMN": "Chimei Innolux Corporation", "DEL": "Dell Inc.",
        "ENC": "Eizo Nanao Corporation", "GSM": "Goldstar Company Ltd", "HWP": "Hewlett Packard",
        "IVM": "Iiyama North America", "LEN": "Lenovo Group Limited", "LGD": "LG Display",
        "NEC": "NEC Corporation", "PHL": "Philips Consumer Electronics Company",
        "RHT": "Red Hat, Inc.", "SAM": "Samsung Electric Company", "SHP": "Sharp Corporation",
        "SNY": "Sony", "VSC": "ViewSonic Corporation",
    ])
}
