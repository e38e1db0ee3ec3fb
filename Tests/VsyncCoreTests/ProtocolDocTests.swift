import Foundation
import Testing
@testable import VsyncCore

/// Keeps docs/PROTOCOL.md honest: its rate table and its worked example are checked against the code.
@Suite("Protocol document")
struct ProtocolDocTests {
    static let document: String = {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        return (try? String(contentsOf: root.appendingPathComponent("docs/PROTOCOL.md"), encoding: .utf8)) ?? ""
    }()

    @Test func rateTableMatchesRateMapping() throws {
        let lines = Self.document.split(separator: "\n").map(String.init)
        guard let start = lines.firstIndex(where: { $0.hasPrefix("| refresh Hz | min | max | preferred | divisor |") }) else {
            Issue.record("rate table not found in docs/PROTOCOL.md"); return
        }
        var rows = 0
        for line in lines[(start + 2)...] {
            guard line.hasPrefix("|") else { break }
            let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            let n = cells.compactMap(Double.init)
            try #require(n.count == 6, "bad row: \(line)")
            let range = try FrameRateRange(minimum: Float(n[1]), maximum: Float(n[2]), preferred: Float(n[3]))
            let d = RateMapping.divisor(for: range, refreshHz: n[0])
            #expect(Double(d) == n[4], "\(line): code gives divisor \(d)")
            #expect(abs(n[0] / Double(d) - n[5]) < 0.01, "\(line)")
            rows += 1
        }
        #expect(rows >= 20)
    }

    /// The numbers in `text` (a line of the document), in order.
    static func numbers(_ text: Substring) -> [Int] {
        text.split(whereSeparator: { !$0.isNumber }).compactMap { Int($0) }
    }

    /// Every message heading states the size the code writes (and version 1's, where it
    /// differs), and so does every table's header row that names a size.
    @Test func messageSizesMatchTheCode() throws {
        let lines = Self.document.split(separator: "\n")
        var checked = 0
        for type in MessageType.allCases {
            let tag = String(format: "`0x%04X`", type.rawValue)
            guard let at = lines.firstIndex(where: { $0.hasPrefix("### ") && $0.contains(tag) }) else {
                Issue.record("no heading for \(type) (\(tag)) in docs/PROTOCOL.md"); continue
            }
            let heading = lines[at]
            // "### TICK (`0x0105`, 152 bytes; 72 in version 1)"; "…`0x0007`): 12 bytes each".
            let sizes = Self.numbers(heading[heading.range(of: tag)!.upperBound...].prefix { $0 != "×" })
            guard let stated = type == .pause || type == .resume ? sizes.last : sizes.first else {
                Issue.record("no size in \(heading)"); continue
            }
            #expect(stated == type.knownSize, "\(heading): the code writes \(type.knownSize) bytes")
            if type.minimumSize != type.knownSize {
                #expect(heading.contains("\(type.minimumSize) in version 1"), "\(heading): version 1 writes \(type.minimumSize)")
            }
            // The table under it: "| 0 | header | | type 0x105, size 152 (72 in version 1) |".
            let section = lines[(at + 1)...].prefix { !$0.hasPrefix("#") }
            if let row = section.first(where: { $0.hasPrefix("| 0 | header |") }), let size = row.range(of: "size ") {
                #expect(Self.numbers(row[size.upperBound...]).first == type.knownSize, "\(row): the code writes \(type.knownSize) bytes")
                if type.minimumSize != type.knownSize { #expect(row.contains("\(type.minimumSize)"), "\(row)") }
            }
            checked += 1
        }
        #expect(checked == MessageType.allCases.count)
        // DISPLAY_LIST's record size, as the daemon writes it for each version.
        let row = try #require(lines.first { $0.contains("`record_size`") && $0.hasPrefix("| 12 |") })
        func recordSize(_ version: UInt16) -> Int {
            let list = ServerMessage.displayList([]).encoded(version: version)
            return Int(list[12]) | Int(list[13]) << 8
        }
        #expect(recordSize(1) == DisplayInfo.wireSize && recordSize(2) == DisplayInfo.wireSize)
        #expect(recordSize(3) == DisplayInfo.version3WireSize)
        #expect(recordSize(4) == DisplayInfo.version4WireSize)
        // Version 6 gave a reserved field meaning; its record is version 5's.
        #expect(recordSize(5) == DisplayInfo.version5WireSize && recordSize(WireProtocol.currentVersion) == DisplayInfo.version5WireSize)
        #expect(row.contains("\(recordSize(2)) in versions 1 and 2, \(recordSize(3)) in version 3, \(recordSize(4)) in version 4, \(recordSize(5)) in version 5"),
                "\(row): the daemon writes \(recordSize(2))-byte records to versions 1 and 2, \(recordSize(3)) to 3, \(recordSize(4)) to 4, \(recordSize(5)) to 5")
        // Every record offset the table states is one the codec writes: the last row ends the record.
        let record = lines.drop { !$0.hasPrefix("### The display record") }.dropFirst().prefix { !$0.hasPrefix("#") }
        let last = try #require(record.last { $0.hasPrefix("| 2") }, "no record rows")
        #expect(last.hasPrefix("| \(DisplayInfo.version5WireSize - 8) | u64 |"), "\(last): the version 5 record is \(DisplayInfo.version5WireSize) bytes")
        // SUBSCRIBED and DISPLAY_EVENT headings state each version's size.
        for (type, fixed) in [(MessageType.subscribed, 40), (.displayEvent, 16)] {
            let tag = String(format: "`0x%04X`", type.rawValue)
            let heading = try #require(lines.first { $0.hasPrefix("### ") && $0.contains(tag) })
            #expect(heading.contains("\(fixed + DisplayInfo.version3WireSize) in version 3; \(fixed + DisplayInfo.version4WireSize) in version 4; \(fixed + DisplayInfo.version5WireSize) in version 5"), "\(heading)")
        }
    }

    /// § 7 defines `target_timestamp_ns` at `target_sequence`, and its frame pacing example is
    /// what FramePacing computes for the example's display, rate, work duration and clock.
    @Test func framePacingExampleMatchesFramePacing() throws {
        let lines = Self.document.split(separator: "\n")
        let bullet = try #require(lines.first { $0.hasPrefix("- `target_timestamp_ns` is") })
        let definition = lines.drop { $0 != bullet }.prefix(2).joined(separator: " ")
        #expect(definition.contains("evaluated at `target_sequence`"), "§ 7 must define the target at target_sequence: \(definition)")

        // "Example: a 60 Hz display …, a client at 30 fps (d = 2) with W = 4 ms. Vblank 120 was
        // at 2.000000040 s. The daemon wakes the client at P(122) − 4 ms = 2.029333373 s, …"
        let period = 1e9 / 60, w: UInt64 = 4_000_000
        var model = RefreshModel(nominalPeriodNs: period)
        for s in UInt64(100)...120 { model.add(sequence: s, timestampNs: 2_000_000_040 - UInt64((Double(120 - s) * period).rounded())) }
        let predict = { (s: UInt64) in model.predictedTimestamp(forSequence: s) }
        // Woken for 122: the aim was made after vblank 120, the wake comes after 121.
        let aim = FramePacing.nextTarget(after: 120, divisor: 2, workDurationNs: w, nowNs: 2_000_000_040 + 100_000, periodNs: model.periodNs, predict: predict)
        let timelines = FramePacing.timelines(from: aim.target.sequence, divisor: 2, predict: predict)
        func row(_ name: String) throws -> [Int] {
            let line = try #require(lines.first { $0.hasPrefix("| \(name)") }, "no row \(name) in § 7's example")
            return Self.numbers(line.dropFirst(name.count + 2))
        }
        #expect(try row("`sequence`, `timestamp_ns`") == [121, Int(predict(121))])
        #expect(try row("`target_sequence`, `target_timestamp_ns`") == [Int(aim.target.sequence), Int(aim.target.presentationNs)])
        for (i, t) in timelines.enumerated() {
            #expect(try row("timeline \(i)") == [Int(t.sequence), Int(t.presentationNs)])
        }
        #expect(Self.document.contains("P(\(aim.target.sequence)) − 4 ms = \(DecimalText.fixed(Double(aim.target.wakeNs) / 1e9, places: 9))"),
                "the example's wake time is P(\(aim.target.sequence)) − W = \(aim.target.wakeNs) ns")
    }

    @Test func workedExampleBytesDecodeAndReencode() throws {
        // Blocks start with "→ NAME" or "← NAME" and continue with "    0000  hex…" lines.
        var messages: [(toServer: Bool, bytes: [UInt8])] = []
        for line in Self.document.split(separator: "\n") {
            if line.hasPrefix("→ ") || line.hasPrefix("← ") {
                let toServer = line.hasPrefix("→")
                if let colon = line.firstIndex(of: ":"), line[line.index(after: colon)...].contains(where: \.isHexDigit),
                   line.contains("   ") {
                    // A one-line message: "→ PAUSE id 1:            05 00 0c …"
                    messages.append((toServer, hexBytes(String(line[line.index(after: colon)...]))))
                } else {
                    messages.append((toServer, []))
                }
            } else if line.hasPrefix("    "), let last = messages.indices.last {
                let parts = line.split(separator: " ", omittingEmptySubsequences: true)
                guard parts.count > 1, parts[0].count == 4, parts[0].allSatisfy(\.isHexDigit) else { continue }
                messages[last].bytes += hexBytes(parts.dropFirst().joined(separator: " "))
            }
        }
        let filled = messages.filter { !$0.bytes.isEmpty }
        #expect(filled.count >= 8)
        for m in filled {
            if m.toServer {
                let decoded = try ClientMessage.decode(m.bytes)
                #expect(decoded.encoded() == m.bytes)
            } else {
                let decoded = try #require(try ServerMessage.decode(m.bytes))
                // The example session runs at protocol 2 (its WELCOME says so): 96-byte records.
                #expect(decoded.encoded(version: 2) == m.bytes)
                // §5's rule holds in the example too: client interval = divisor × display interval.
                switch decoded {
                case .subscribed(let s):
                    #expect(s.clientIntervalNs == UInt64(s.divisor) * s.displayIntervalNs, "SUBSCRIBED: \(s)")
                case .tick(let t):
                    #expect(t.clientIntervalNs == UInt64(t.divisor) * t.displayIntervalNs, "TICK: \(t)")
                default:
                    break
                }
            }
        }
    }
}
