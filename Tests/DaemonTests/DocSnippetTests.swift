import Foundation
import Testing

/// The Swift the docs show compiles as written against the built DisplayLink module, in Swift 6
/// with member import visibility (as a new app is built): every ```swift block of README.md and
/// docs/*.md is type-checked as a program of its own. A block that is deliberately a fragment
/// says so in its info string (```swift fragment), and fragments are the exception.
@Suite("Docs' Swift compiles")
struct DocSnippetTests {
    struct Snippet: CustomStringConvertible {
        var document: String
        var line: Int
        var code: String
        var isFragment: Bool
        var description: String { "\(document):\(line)" }
    }

    /// Every fenced Swift block (list items' indented ones too), its indentation removed.
    static func snippets(in text: String, document: String) -> [Snippet] {
        var found: [Snippet] = []
        var open: (line: Int, indent: Int, fragment: Bool, lines: [String])?
        for (i, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = String(raw)
            let trimmed = line.drop { $0 == " " }
            let indent = line.count - trimmed.count
            if var block = open {
                if trimmed.hasPrefix("```") {
                    found.append(Snippet(document: document, line: block.line, code: block.lines.joined(separator: "\n"),
                                         isFragment: block.fragment))
                    open = nil
                } else {
                    block.lines.append(String(line.dropFirst(min(block.indent, indent))))
                    open = block
                }
            } else if trimmed.hasPrefix("```swift") {
                let info = trimmed.dropFirst(3).split(separator: " ")
                open = (i + 1, indent, info.contains("fragment"), [])
            }
        }
        return found
    }

    static func allSnippets() throws -> [Snippet] {
        try DocPathTests.documents().flatMap { doc in
            let name = doc.path.replacingOccurrences(of: DocPathTests.repository.path + "/", with: "")
            return snippets(in: try String(contentsOf: doc, encoding: .utf8), document: name)
        }
    }

    @Test func theExtractorFindsIndentedBlocksAndFragments() {
        let text = "a\n```swift\nlet x = 1\n```\n- item\n\n  ```swift fragment\n  f()\n    g()\n  ```\n```c\nint y;\n```\n"
        let found = Self.snippets(in: text, document: "t.md")
        #expect(found.map(\.code) == ["let x = 1", "f()\n  g()"])
        #expect(found.map(\.isFragment) == [false, true])
        #expect(found.map(\.line) == [2, 7])
    }

    /// Type-checks `code` as an app's main.swift against the built DisplayLink module.
    static func typecheck(_ code: String, in directory: URL) throws -> (status: Int32, output: String) {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let file = directory.appendingPathComponent("main.swift")
        try code.write(to: file, atomically: true, encoding: .utf8)
        let modules = URL(fileURLWithPath: DaemonProcess.binaryPath).deletingLastPathComponent().appendingPathComponent("Modules")
        return try Command.run([
            "swiftc", "-typecheck", "-swift-version", "6", "-enable-upcoming-feature", "MemberImportVisibility",
            "-warnings-as-errors", "-I", modules.path,
            // The C modules the client core imports (their module maps), as an installed app gets them.
            "-I", DocPathTests.repository.appendingPathComponent("Sources").path,
            "-I", DocPathTests.repository.appendingPathComponent("Sources/CVsyncHang/include").path, file.path,
        ])
    }

    static func scratch() -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("doc-snippets-\(UUID().uuidString.prefix(8))")
    }

    @Test func everySwiftBlockOfTheDocsTypeChecks() throws {
        let snippets = try Self.allSnippets()
        #expect(snippets.count >= 4, "the README shows DisplayLink in at least four Swift blocks")
        let fragments = snippets.filter(\.isFragment)
        #expect(fragments.count * 4 <= snippets.count, "fragments are the exception: \(fragments)")
        let directory = Self.scratch()
        defer { try? FileManager.default.removeItem(at: directory) }
        for (i, snippet) in snippets.enumerated() where !snippet.isFragment {
            // As main.swift: a block may be top-level code, as an app's main file is.
            let result = try Self.typecheck(snippet.code, in: directory.appendingPathComponent("\(i)"))
            #expect(result.status == 0, "\(snippet) does not compile:\n\(result.output)")
        }
    }

    /// The types DisplayLink's API hands out come from modules an app cannot import (they are
    /// not products): their members must still be visible to it.
    @Test func membersOfTheTypesALinkHandsOutAreVisibleToAnApp() throws {
        let directory = Self.scratch()
        defer { try? FileManager.default.removeItem(at: directory) }
        let result = try Self.typecheck("""
            import DisplayLink

            func describe(_ frame: DisplayLink.Frame) -> String {
                let later: FrameTimeline = frame.frameTimelines[1]
                return "vblank \\(later.sequence) at \\(later.presentationNs) ns of \\(frame.frameTimelines.count)"
                    + (frame.flags.contains(.synthetic) ? ", synthetic" : "")
            }
            let link = DisplayLink(display: .connector("HDMI-A-1")) { link in
                if let frame = link.currentFrame { print(describe(frame)) }
            }
            link.preferredFrameRateRange = FrameRateRange(preferredFramesPerSecond: 30)
            """, in: directory)
        #expect(result.status == 0, "\(result.output)")
    }
}
