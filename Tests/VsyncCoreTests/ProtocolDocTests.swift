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
