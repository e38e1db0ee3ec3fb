// swift-tools-version:6.1
import Foundation
import PackageDescription

// The benchmarks and the soak: a package of their own, so the product package (..) builds
// only what users run and link, and HdrHistogram stays out of it. They build against the
// product package's libraries; vsyncd and libvsync.so come from its own build (`swift build`
// in ..), found next to these tools or in ../.build/<configuration>.
//
//   swift build -c release --package-path Benchmarks    # .build/release of this folder
//
// Module map:
//   vsync-bench            runs vsyncd and N vsync-bench-client processes against the C floor
//                          in reference/fanout.c (docs/PERFORMANCE.md).
//   vsync-bench-client     one client process of the bench: DisplayLink, or raw on VsyncCore.
//   vsync-bench-framework  how late a link's callbacks start while FrameWork's pool is busy.
//   vsync-soak             vsyncd at 240 Hz with clients that join, leave, pause and change rates.
//   ProcessTools           child processes, /proc readings and the bench client's report, shared
//                          by the bench and the soak (SplitMix64 is the tests' file, symlinked).

/// SwiftPM names a path dependency after its folder, so the product package is whatever its
/// checkout is called (vsyncd, a worktree, a source tarball's folder): named from the path.
let vsyncd = URL(fileURLWithPath: Context.packageDirectory).deletingLastPathComponent().lastPathComponent.lowercased()

let package = Package(
    name: "vsyncd-benchmarks",
    dependencies: [
        .package(path: ".."),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift", from: "0.2.0"),
    ],
    targets: [
        .executableTarget(
            name: "vsync-bench",
            dependencies: [
                "ProcessTools",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
            ]
        ),
        .executableTarget(
            name: "vsync-bench-client",
            dependencies: [
                "ProcessTools",
                .product(name: "DisplayLink", package: vsyncd),
                .product(name: "VsyncCore", package: vsyncd),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
            ]
        ),
        .executableTarget(
            name: "vsync-bench-framework",
            dependencies: [
                "ProcessTools",
                .product(name: "DisplayLink", package: vsyncd),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .target(name: "ProcessTools"),
        .executableTarget(
            name: "vsync-soak",
            dependencies: [
                "ProcessTools",
                .product(name: "DisplayLink", package: vsyncd),
                .product(name: "VsyncCore", package: vsyncd),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
