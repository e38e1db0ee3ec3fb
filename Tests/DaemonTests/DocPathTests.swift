import Foundation
import Testing

/// Every repository file a document names exists: README.md and docs/*.md, their relative links,
/// backticked paths under the repository's top-level directories, and backticked Swift and C
/// file names (found anywhere in the repository).
@Suite("Docs name files that exist")
struct DocPathTests {
    static let repository = SystemdUnitTests.repository
    static let topLevel = ["Sources", "Tests", "Scripts", "docs", "examples", "include", "debian", "Benchmarks",
                           "bindings", "systemd", "Fuzz"]
    /// Made by a build, not kept in the repository.
    static let generated: Set<String> = ["debian/tmp", "out/deb"]

    static func documents() throws -> [URL] {
        let docs = repository.appendingPathComponent("docs")
        return [repository.appendingPathComponent("README.md")]
            + (try FileManager.default.contentsOfDirectory(atPath: docs.path)).filter { $0.hasSuffix(".md") }.sorted()
                .map { docs.appendingPathComponent($0) }
    }

    /// Every file name in the repository (outside build products).
    static func fileNames() -> Set<String> {
        var names = Set<String>()
        let skip: Set<String> = [".build", ".git", "target", "out", "node_modules"]
        let enumerator = FileManager.default.enumerator(at: repository, includingPropertiesForKeys: nil)
        while let url = enumerator?.nextObject() as? URL {
            if skip.contains(url.lastPathComponent) || url.lastPathComponent.hasPrefix(".build") {
                enumerator?.skipDescendants()
                continue
            }
            names.insert(url.lastPathComponent)
        }
        return names
    }

    static func matches(_ pattern: String, in text: String) -> [String] {
        let regex = try! NSRegularExpression(pattern: pattern)
        return regex.matches(in: text, range: NSRange(text.startIndex..., in: text)).compactMap {
            Range($0.range(at: 1), in: text).map { String(text[$0]) }
        }
    }

    static func exists(_ path: String, relativeTo base: URL) -> Bool {
        let url = base.appendingPathComponent(path).standardizedFileURL
        return FileManager.default.fileExists(atPath: url.path) || FileManager.default.fileExists(atPath: url.path + ".swift")
    }

    @Test func everyFileADocNamesExists() throws {
        let names = Self.fileNames()
        var missing: [String] = []
        for doc in try Self.documents() {
            let text = try String(contentsOf: doc, encoding: .utf8)
            let name = doc.path.replacingOccurrences(of: Self.repository.path + "/", with: "")
            let docDir = doc.deletingLastPathComponent()
            // Markdown links to files: [text](path) with no scheme.
            for target in Self.matches(#"\]\(([^)#\s]+)(?:#[^)]*)?\)"#, in: text) where !target.contains(":") {
                if !Self.exists(target, relativeTo: docDir) { missing.append("\(name): link \(target)") }
            }
            // Backticked repository paths.
            for token in Self.matches(#"`([^`\s]+)`"#, in: text) {
                let path = token.hasSuffix("/") ? String(token.dropLast()) : token
                guard let first = path.split(separator: "/").first, Self.topLevel.contains(String(first)),
                      !path.contains("*"), !path.contains("{"), !path.contains("<"), !Self.generated.contains(path) else {
                    // Any other relative path to a document or a Swift file: from the repository's root.
                    if token.contains("/"), !token.hasPrefix("/"), !token.contains("*"),
                       token.hasSuffix(".md") || token.hasSuffix(".swift"), !Self.exists(token, relativeTo: Self.repository) {
                        missing.append("\(name): path \(token)")
                    }
                    // A bare Swift or C file name: somewhere in the repository.
                    if !token.contains("/"), token.range(of: #"^[A-Za-z0-9_+\-]+\.(swift|c|h)$"#, options: .regularExpression) != nil,
                       !names.contains(token) {
                        missing.append("\(name): file \(token)")
                    }
                    continue
                }
                if !Self.exists(path, relativeTo: Self.repository) { missing.append("\(name): path \(token)") }
            }
        }
        #expect(missing.isEmpty, "documents name files that do not exist:\n\(missing.joined(separator: "\n"))")
    }
}
