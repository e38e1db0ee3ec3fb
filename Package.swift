// swift-tools-version:6.1
import Foundation
import PackageDescription

// Module map (why each target exists; the benchmarks are a package of their own in Benchmarks/):
//   VsyncCore        pure logic: refresh math, the refresh model, rate mapping, the wire protocol. No syscalls.
//   CDRM             libdrm headers via pkg-config. Imported by VsyncDRM only, never re-exported.
//   VsyncDRM         cards, connectors, CRTCs, modes and vblank events on /dev/dri/cardN.
//   CLinux           epoll, timerfd, signalfd and inotify headers, which Swift's Glibc module lacks.
//   VsyncDaemon      vsyncd's server: event loop, clients, broadcast, systemd glue.
//   CVsyncPage       the timing page's layout and seqlock, shared by its writer (vsyncd) and readers.
//   CVsyncSys        the libc calls of the client core, for its normal and its Embedded build.
//   VsyncClientCore  the thread-free client core (one socket, one fd, dispatch): DisplayLink and libvsync.
//   DisplayLink      the client library Swift apps link: VsyncClientCore under CADisplayLink's API (Foundation).
//   VsyncCeil        ceil() for libvsync, so it needs no libm.
//   CVsyncABI        libvsync's public C header (include/vsync/vsync.h) as a module.
//   LibVsync         libvsync.so: the C API in Embedded Swift over the client core's own files, libc only.
//   VsyncProbe       vsync-probe's commands.
//   vsync-probe      vsync-probe's main.swift.
//   vsyncd           vsyncd's main.swift: options, logging, VsyncDaemon.
//   framework-demo   example: DisplayLink's FrameWork rasterizing on the CPU (examples/).
//   vkms-modeset     test bed helper (Tests/TestBed): exact custom modes on vkms in the VM. No product.
//   frame-faults-app test bed helper (Tests/TestBed): an app injecting frame faults on signals, in the VM. No product.
//   TestSupport      test-only helpers shared by the test targets (the seeded SplitMix64, /proc readings).
//   CVsyncPageMaker  test-only C: a sealed memfd timing page as vsyncd makes it.
//   VsyncCoreTests, VsyncClientCoreTests, DaemonTests, VsyncDRMTests, VMTests  the tests.

/// The Embedded Swift libraries of the toolchain building this package (libvsync links its
/// Unicode tables from there), found from the `swift` on PATH; `VSYNC_EMBEDDED_LIB_DIR` overrides.
/// The triple is the host's: the manifest is compiled for the machine that builds.
let embeddedTriple: String = {
    #if arch(x86_64)
    return "x86_64-unknown-linux-gnu"
    #elseif arch(arm64)
    return "aarch64-unknown-linux-gnu"
    #else
    var name = utsname()
    uname(&name)
    let machine = withUnsafeBytes(of: &name.machine) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
    return "\(machine)-unknown-linux-gnu"
    #endif
}()
let embeddedLibDir: String = {
    let env = ProcessInfo.processInfo.environment
    if let dir = env["VSYNC_EMBEDDED_LIB_DIR"] { return dir }
    for entry in (env["PATH"] ?? "").split(separator: ":") {
        let swift = URL(fileURLWithPath: String(entry)).appendingPathComponent("swift")
        guard FileManager.default.isExecutableFile(atPath: swift.path) else { continue }
        let usr = swift.resolvingSymlinksInPath().deletingLastPathComponent().deletingLastPathComponent()
        return usr.appendingPathComponent("lib/swift/embedded/\(embeddedTriple)").path
    }
    return "/usr/lib/swift/embedded/\(embeddedTriple)"
}()

let package = Package(
    name: "vsyncd",
    products: [
        .library(name: "DisplayLink", targets: ["DisplayLink"]),
        // The same library as a .so, for apps built outside SwiftPM (Scripts/install.sh).
        .library(name: "DisplayLinkShared", type: .dynamic, targets: ["DisplayLink"]),
        // libvsync: the C API (include/vsync/vsync.h) as libvsync.so, needing only libc.
        .library(name: "vsync", type: .dynamic, targets: ["LibVsync"]),
        // The wire protocol, for Swift code that speaks it on a raw socket (the benchmarks' raw
        // client and the soak): the one protocol definition, never a second encoder.
        .library(name: "VsyncCore", targets: ["VsyncCore"]),
        .executable(name: "vsyncd", targets: ["vsyncd"]),
        .executable(name: "vsync-probe", targets: ["vsync-probe"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
    ],
    targets: [
        .target(name: "VsyncCore"),
        .systemLibrary(
            name: "CDRM",
            pkgConfig: "libdrm",
            providers: [.apt(["libdrm-dev"])]
        ),
        .target(
            name: "VsyncDRM",
            dependencies: ["CDRM", "VsyncCore", .product(name: "Logging", package: "swift-log")]
        ),
        // epoll, timerfd, signalfd and inotify headers, which Swift's Glibc module lacks.
        .systemLibrary(name: "CLinux"),
        .target(
            name: "VsyncDaemon",
            dependencies: ["CLinux", "CVsyncPage", "VsyncCore", "VsyncDRM", .product(name: "Logging", package: "swift-log")]
        ),
        // The timing page (protocol 5) in C: one layout and one seqlock for the daemon that
        // writes it and the client cores that read it (Swift has no atomics on shared memory).
        .systemLibrary(name: "CVsyncPage"),
        // What VsyncClientCore needs of libc, through its own module map: libvsync's Embedded
        // Swift build has no Glibc module.
        .systemLibrary(name: "CVsyncSys"),
        .target(name: "VsyncClientCore", dependencies: ["VsyncCore", "CVsyncSys", "CVsyncPage"]),
        // Hang stack capture: the signal handler and ELF symbol lookup, in C (no Swift runtime
        // in a signal handler).
        .target(name: "CVsyncHang"),
        .target(name: "DisplayLink", dependencies: ["VsyncCore", "VsyncClientCore", "CVsyncHang"]),
        // ceil() for libvsync, which would otherwise need libm.so.6 for it (see ceil.c).
        .target(name: "VsyncCeil"),
        // The public C header as a module, so the Swift behind it uses the structs C compiles against.
        .systemLibrary(name: "CVsyncABI"),
        // libvsync in Embedded Swift: the protocol's and the client core's own source files
        // (symlinked) plus the C API, one module, linked against libc alone. unsafeFlags keep it
        // out of any product a package depending on this one by version would use.
        .target(
            name: "LibVsync",
            dependencies: ["CVsyncSys", "CVsyncPage", "CVsyncABI", "VsyncCeil"],
            path: "Sources/libvsync",
            exclude: ["vsync.map", "vsync.pc.in", "vsync-glib.pc.in", "vsync-qt.pc.in"],
            swiftSettings: [
                .enableExperimentalFeature("Embedded"),
                .unsafeFlags(["-wmo"]),
                .define("VSYNC_EMBEDDED"),
            ],
            linkerSettings: [
                // The Embedded stdlib's Unicode tables (String comparison, character boundaries),
                // a static archive: linked in, not needed at run time.
                .linkedLibrary("swiftUnicodeDataTables"),
                .unsafeFlags([
                    "-L", embeddedLibDir,
                    "-Xlinker", "-soname=libvsync.so.1",
                    "-Xlinker", "--no-undefined",
                    // Bind every symbol at load, so RELRO covers the whole GOT (Debian's hardening).
                    "-Xlinker", "-z", "-Xlinker", "now",
                    "-Xlinker", "--version-script=\(Context.packageDirectory)/Sources/libvsync/vsync.map",
                ]),
            ]
        ),
        .target(
            name: "VsyncProbe",
            dependencies: [
                "VsyncCore", "VsyncDRM", "VsyncClientCore",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .executableTarget(name: "vsync-probe", dependencies: ["VsyncProbe"]),
        .executableTarget(
            name: "vsyncd",
            dependencies: [
                "VsyncCore", "VsyncDaemon",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Test bed helper: sets custom modes and turns CRTCs off on vkms inside the VM. Not a
        // product; `swift build` still builds it, and the VM tests run it from .build/debug.
        .executableTarget(
            name: "vkms-modeset",
            dependencies: ["VsyncDRM", .product(name: "ArgumentParser", package: "swift-argument-parser")],
            path: "Tests/TestBed/vkms-modeset"
        ),
        // Test bed helper: an app with a FrameMonitor, its trace and a hang detector that injects
        // its own faults on signals, for the VM's frame-reason test. Not a product, like vkms-modeset.
        .executableTarget(
            name: "frame-faults-app",
            dependencies: ["DisplayLink", .product(name: "ArgumentParser", package: "swift-argument-parser")],
            path: "Tests/TestBed/frame-faults-app"
        ),
        // Example: DisplayLink's FrameWork rasterizing on the CPU against a real vsyncd.
        .executableTarget(
            name: "framework-demo",
            dependencies: ["DisplayLink", .product(name: "ArgumentParser", package: "swift-argument-parser")],
            path: "examples/framework-demo"
        ),
        // What the tests share (the seeded SplitMix64); Benchmarks/ links the same file.
        .target(name: "TestSupport", path: "Tests/TestSupport"),
        .testTarget(name: "VsyncCoreTests", dependencies: ["VsyncCore", "TestSupport"]),
        // Test-only C: a sealed memfd timing page as vsyncd makes it, its fd sent as SCM_RIGHTS,
        // and the seqlock torture test's writer thread (Swift's Glibc has no memfd or cmsg).
        .systemLibrary(name: "CVsyncPageMaker", path: "Tests/CVsyncPageMaker"),
        // The client core in-process over socketpairs, against a scripted server.
        .testTarget(name: "VsyncClientCoreTests", dependencies: ["VsyncClientCore", "VsyncCore", "CVsyncPageMaker", "TestSupport"]),
        .testTarget(name: "DaemonTests", dependencies: ["VsyncCore", "VsyncDaemon", "DisplayLink", "VsyncClientCore", "TestSupport"]),
        .testTarget(name: "VMTests", dependencies: ["VsyncCore", "TestSupport"]),
        // Pure parts of the DRM layer (names, encodings, messages); no device needed.
        .testTarget(name: "VsyncDRMTests", dependencies: ["VsyncDRM", "VsyncCore"]),
    ],
    swiftLanguageModes: [.v6]
)
