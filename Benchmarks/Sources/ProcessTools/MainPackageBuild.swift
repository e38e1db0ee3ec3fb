import Foundation

/// Where the benchmarks find the product package's own builds (vsyncd, libvsync.so): this
/// package (Benchmarks/) builds only its tools, so next to the running tool if one was put
/// there, else in the product package's build of the same configuration (../.build/release).
public enum MainPackageBuild {
    /// The repository root: this file is Benchmarks/Sources/ProcessTools/MainPackageBuild.swift.
    public static let repositoryRoot: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent()  // ProcessTools
        .deletingLastPathComponent()  // Sources
        .deletingLastPathComponent()  // Benchmarks
        .deletingLastPathComponent()

    /// `name` next to the running executable, else in `<repository>/.build/<its configuration>`.
    public static func product(_ name: String) -> String {
        let here = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
        let beside = here.appendingPathComponent(name).path
        if FileManager.default.fileExists(atPath: beside) { return beside }
        return repositoryRoot.appendingPathComponent(".build").appendingPathComponent(here.lastPathComponent)
            .appendingPathComponent(name).path
    }
}
