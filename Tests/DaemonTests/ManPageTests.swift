import Foundation
import Testing
import VsyncCore

/// The man pages in docs/man: each documents every option the program's own help has, names
/// the one version, and renders without a groff warning.
@Suite("Man pages")
struct ManPageTests {
    static let directory = SystemdUnitTests.repository.appendingPathComponent("docs/man")

    static func page(_ name: String) throws -> String {
        try String(contentsOf: directory.appendingPathComponent(name), encoding: .utf8)
    }

    /// Every long option of `program` and its subcommands, from swift-argument-parser's own
    /// description of the command line (what generate-manual reads).
    static func longOptions(_ program: String) throws -> Set<String> {
        let result = try Command.run([try DaemonProcess.binary(program), "--experimental-dump-help"])
        try #require(result.status == 0, "\(program) --experimental-dump-help: \(result.output)")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(result.output.utf8)) as? [String: Any])
        var names: Set<String> = []
        func walk(_ command: [String: Any]) {
            for argument in command["arguments"] as? [[String: Any]] ?? [] {
                for name in argument["names"] as? [[String: Any]] ?? [] where name["kind"] as? String == "long" {
                    if let n = name["name"] as? String { names.insert(n) }
                }
            }
            for sub in command["subcommands"] as? [[String: Any]] ?? [] { walk(sub) }
        }
        walk(try #require(json["command"] as? [String: Any]))
        return names
    }

    @Test(arguments: [("vsyncd", "vsyncd.8"), ("vsync-probe", "vsync-probe.1")])
    func documentsEveryOption(program: String, page: String) throws {
        let text = try Self.page(page)
        let options = try Self.longOptions(program)
        #expect(options.count >= 5, "too few options read from \(program): \(options)")
        for option in options.sorted() where option != "experimental-dump-help" {
            // roff escapes the hyphens: \-\-max\-clients.
            let roff = "\\-\\-" + option.replacingOccurrences(of: "-", with: "\\-")
            #expect(text.contains(roff), "\(page) does not document --\(option)")
        }
    }

    @Test(arguments: ["vsyncd.8", "vsync-probe.1", "libvsync.3"])
    func namesTheVersionAndRendersCleanly(page: String) throws {
        let text = try Self.page(page)
        #expect(text.contains("\"vsyncd \(VsyncVersion.string)\""), "\(page)'s .TH does not say vsyncd \(VsyncVersion.string)")
        let path = Self.directory.appendingPathComponent(page).path
        // -ww: every warning; -z: no output. Any line on stderr is a warning.
        let result = try Command.run(["sh", "-c", "groff -man -Tutf8 -ww -z '\(path)' 2>&1"])
        #expect(result.status == 0 && result.output.isEmpty, "groff on \(page): \(result.output)")
    }

    @Test func libvsyncPageListsEveryExportedCall() throws {
        let text = try Self.page("libvsync.3")
        let header = try String(contentsOf: SystemdUnitTests.repository.appendingPathComponent("include/vsync/vsync.h"), encoding: .utf8)
        let calls = header.split(separator: "\n").compactMap { line -> String? in
            guard let range = line.range(of: #"\bvsync_[a-z_]+(?=\()"#, options: .regularExpression),
                  !line.hasPrefix("typedef"), !line.hasPrefix(" "), !line.hasPrefix("/*") else { return nil }
            return String(line[range])
        }
        #expect(calls.count == 25, "calls read from vsync.h: \(calls)")
        for call in calls {
            #expect(text.contains(call + "("), "libvsync.3's synopsis does not list \(call)")
        }
    }
}
