/// The vertical refresh range of a monitor's EDID display range limits descriptor (base block,
/// tag 0xFD): the range a variable-refresh (VRR, FreeSync, Adaptive-Sync) display can vary in.
///
/// Why not libdisplay-info (`di_edid_display_range_limits`, which also reads DisplayID): Debian
/// bookworm has it only in bookworm-backports, so the `vsyncd` package built there could not
/// depend on it, and vsyncd needs these two numbers of one descriptor (EDID 1.4 § 3.10.3.3).
/// Pure: handed the blob VsyncDRM read from the connector's `EDID` property.
public struct EDIDRefreshRange: Sendable, Hashable {
    /// Lowest and highest vertical rate, Hz (whole Hz, as the descriptor stores them).
    public var minimumHz: UInt16
    public var maximumHz: UInt16

    public init(minimumHz: UInt16, maximumHz: UInt16) {
        self.minimumHz = minimumHz
        self.maximumHz = maximumHz
    }

    /// The longest interval, 1 / minimum rate, ns (rounded).
    public var longestIntervalNs: UInt64 { minimumHz == 0 ? 0 : (2_000_000_000 / UInt64(minimumHz) + 1) / 2 }
    /// The shortest interval, 1 / maximum rate, ns (rounded).
    public var shortestIntervalNs: UInt64 { maximumHz == 0 ? 0 : (2_000_000_000 / UInt64(maximumHz) + 1) / 2 }

    /// Reads the first range limits descriptor of `edid`'s base block (header and checksum
    /// checked as `EDIDIdentity` does). Nil without one, or when it says nothing usable
    /// (a rate of 0, minimum above maximum).
    public init?(_ edid: [UInt8]) {
        guard edid.count >= 128, Array(edid[0..<8]) == [0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x00] else { return nil }
        var sum: UInt8 = 0
        for b in edid[0..<128] { sum &+= b }
        guard sum == 0 else { return nil }
        // Four 18-byte descriptors at 54; a display descriptor starts 00 00 00 TAG.
        for start in stride(from: 54, to: 126, by: 18)
        where edid[start] == 0 && edid[start + 1] == 0 && edid[start + 2] == 0 && edid[start + 3] == 0xFD {
            // Byte 4's bits 0-1 (EDID 1.4): 10 adds 255 to the maximum vertical rate, 11 to both;
            // that is how a 360 Hz monitor says 360 in a byte.
            let offsets = edid[start + 4] & 0x03
            let minimum = UInt16(edid[start + 5]) + (offsets == 0x03 ? 255 : 0)
            let maximum = UInt16(edid[start + 6]) + (offsets & 0x02 != 0 ? 255 : 0)
            guard minimum > 0, maximum >= minimum else { return nil }
            self.init(minimumHz: minimum, maximumHz: maximum)
            return
        }
        return nil
    }
}
