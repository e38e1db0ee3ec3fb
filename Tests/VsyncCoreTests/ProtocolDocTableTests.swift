import Foundation
import TestSupport
import Testing
@testable import VsyncCore

/// More of docs/PROTOCOL.md checked against the code: § 2's message table, SUBSCRIBE's sizes by
/// kind, where version 2 starts in TICK, and § 10's rounding of the page's line. Also what the
/// other client-facing documents say of the protocol.
extension ProtocolDocTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static func read(_ path: String) -> String {
        (try? String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)) ?? ""
    }

    /// The rows of the first table whose header row starts with `header`, as trimmed cells.
    static func table(_ header: String, in document: String = document) -> [[String]] {
        let lines = document.split(separator: "\n").map(String.init)
        guard let start = lines.firstIndex(where: { $0.hasPrefix(header) }) else { return [] }
        return lines[(start + 2)...].prefix { $0.hasPrefix("|") }.map { line in
            line.split(separator: "|", omittingEmptySubsequences: false).dropFirst().dropLast()
                .map { $0.trimmingCharacters(in: .whitespaces) }
        }
    }

    /// § 2's table lists every message type the codec knows, with its name as its heading has
    /// it, its direction and the size the code writes; and nothing else.
    @Test func headerTableListsEveryMessage() throws {
        let rows = Self.table("| type | name | direction | known size (bytes) |")
        try #require(!rows.isEmpty, "§ 2's message table not found")
        var listed: [MessageType] = []
        for row in rows {
            try #require(row.count == 4, "bad row: \(row)")
            let hex = row[0].trimmingCharacters(in: CharacterSet(charactersIn: "`"))
            guard let raw = UInt16(hex.dropFirst(2), radix: 16), let type = MessageType(rawValue: raw) else {
                Issue.record("§ 2 lists \(row[0]), which the codec does not know"); continue
            }
            listed.append(type)
            let heading = try #require(Self.document.split(separator: "\n").first { $0.hasPrefix("### ") && $0.contains(row[0]) },
                                       "no heading for \(row[0])")
            #expect(heading.contains("\(row[1]) (\(row[0])"), "§ 2 calls \(row[0]) \(row[1]); its heading: \(heading)")
            #expect(row[2] == (type.isClientRequest ? "client → server" : "server → client"), "\(row)")
            #expect(Self.numbers(Substring(row[3])).first == type.knownSize, "\(row): the code writes \(type.knownSize) bytes")
        }
        #expect(listed.sorted { $0.rawValue < $1.rawValue } == MessageType.allCases.sorted { $0.rawValue < $1.rawValue },
                "§ 2 lists \(listed), the codec knows \(MessageType.allCases)")
    }

    /// § 2's table of SUBSCRIBE sizes by kind is what the decoder does, cell by cell.
    @Test func subscribeSizeTableMatchesTheDecoder() throws {
        let rows = Self.table("| kind | 68 bytes | 69–79 | 80 | 81–207 | 208 or more |")
        try #require(rows.count == 2, "§ 2's SUBSCRIBE size table not found")
        let columns: [[Int]] = [[68], [69, 79], [80], [81, 150, 207], [208, 300]]
        for row in rows {
            let kinds: [UInt8] = row[0] == "0–3" ? [0, 1, 2, 3] : row[0] == "4" ? [4] : []
            try #require(!kinds.isEmpty, "bad row \(row)")
            for (cell, sizes) in zip(row.dropFirst(), columns) {
                for kind in kinds {
                    for size in sizes {
                        let bytes = DisplaySelectorTests.subscribe(kind: kind, selectorID: 7, name: "DP-1", text: "DP-1", size: size)
                        let accepted = (try? ClientMessage.decode(bytes)) != nil
                        #expect(accepted == !cell.contains("malformed"), "kind \(kind), \(size) bytes: the doc says '\(cell)'")
                    }
                }
            }
        }
    }

    /// "Version 2 from here" marks the first field a version 1 TICK does not have.
    @Test func tickVersion2NoteIsOnTheFirstVersion2Field() throws {
        let lines = Self.document.split(separator: "\n")
        let tick = lines.drop { !$0.hasPrefix("### TICK") }.dropFirst().prefix { !$0.hasPrefix("#") }
        let marked = tick.filter { $0.lowercased().contains("version 2 from here") }
        #expect(marked.count == 1 && marked.first?.hasPrefix("| \(Tick.version1WireSize) |") == true,
                "the note is on \(marked), version 1's TICK ends at \(Tick.version1WireSize)")
    }

    /// § 10's rounding of the page's line: the exact integer formula it gives, and the binary64
    /// computation libvsync and DisplayLink use (VBlankTiming), which it says is that or 1 ns off.
    @Test func pageLineRoundingIsWhatTheDocumentSays() throws {
        #expect(Self.document.contains("P(s) = anchor_ns + ((k × Q + 2³¹) >> 32)          for k ≥ 0"))
        #expect(Self.document.contains("P(s) = anchor_ns − ((|k| × Q + 2³¹) >> 32)        for k < 0"))
        func exact(_ t: VBlankTiming, _ s: UInt64) -> UInt64 {
            let q = t.periodWholeNs << 32 | UInt64(t.periodFraction)
            let k = s >= t.anchorSequence ? s - t.anchorSequence : t.anchorSequence - s
            let p = k.multipliedFullWidth(by: q)
            let (low, carry) = p.low.addingReportingOverflow(1 << 31)
            let offset = (p.high + (carry ? 1 : 0)) << 32 | low >> 32
            return s >= t.anchorSequence ? t.anchorNs + offset : t.anchorNs - offset
        }
        var rng = SplitMix64(seed: 0x1057)
        var off = 0, far = 0, farOff = 0
        for i in 0..<20_000 {
            let whole = UInt64.random(in: 2_000_000...50_000_000, using: &rng)
            let anchorSequence = UInt64.random(in: 2_000_000...4_000_000, using: &rng)
            let t = VBlankTiming(displayID: 1, generation: 0, flags: 0, lastSequence: anchorSequence, lastTimestampNs: 0,
                                 anchorSequence: anchorSequence, anchorNs: UInt64.random(in: 100_000_000_000_000...200_000_000_000_000, using: &rng),
                                 periodWholeNs: whole, periodFraction: UInt32.random(in: 0...UInt32.max, using: &rng),
                                 refreshMillihertz: 0, updatedNs: 0)
            let reach: UInt64 = i % 2 == 0 ? 1000 : 1_000_000
            let s = anchorSequence - reach + UInt64.random(in: 0...(2 * reach), using: &rng)
            let (a, b) = (t.timestamp(ofSequence: s), exact(t, s))
            #expect(a == b || a == b + 1 || a + 1 == b, "vblank \(s): \(a) against \(b)")
            if reach == 1000 { off += a == b ? 0 : 1 } else { far += 1; farOff += a == b ? 0 : 1 }
        }
        #expect(off == 0, "within 1000 frames of the anchor binary64 is exact: \(off) off")
        #expect(farOff * 100 < far, "rarely off 10⁶ frames away: \(farOff) of \(far)")
    }

    /// The client-facing documents carry no tracker numbers (they say the reason itself), and
    /// libvsync's states the list limits the protocol has.
    @Test func clientDocumentsAreCurrent() {
        for path in ["docs/PROTOCOL.md", "docs/LIBVSYNC.md", "README.md"] {
            let text = Self.read(path)
            #expect(!text.isEmpty, "\(path) not found")
            #expect(text.range(of: #"[Ii]ssue \d+"#, options: .regularExpression) == nil, "\(path) names an issue number")
        }
        let libvsync = Self.read("docs/LIBVSYNC.md")
        let five = ServerMessage.maxDisplaysPerList(version: 5)
        #expect(libvsync.contains("One list holds at most \(five) displays at protocol 5"), "a version 5 list holds at most \(five)")
        #expect(!libvsync.contains("until vsyncd's display"), "LIBVSYNC.md still waits for names protocol 3 carries")
    }
}
