import Foundation
import Testing

/// The Rust crate (bindings/rust) and the Python package (bindings/python), as their users get
/// them: built against the installed libvsync, then run against the real vsyncd on the timer
/// source with the Swift toolchain hidden (LibvsyncTests.withoutToolchain). Their own suites
/// (cargo test, pytest) run from Scripts/test-bindings.sh.
@Suite("libvsync bindings", .serialized)
struct LibvsyncBindingsTests {
    @Test(.timeLimit(.minutes(5)))
    func rustAndPythonProgramsGetTicksWithoutTheSwiftToolchain() throws {
        let daemon = try DaemonProcess(hertz: 60, logLevel: "warning")
        defer { daemon.stop() }
        let destdir = try SystemdUnitTests.stage()
        defer { try? FileManager.default.removeItem(at: destdir) }
        let lib = destdir.appendingPathComponent("usr/local/lib")
        let work = daemon.directory
        let repository = LibvsyncTests.repository

        // Rust: the crate's example, linked against the installed library (LIBVSYNC_DIR).
        let target = work.appendingPathComponent("cargo-target").path
        let cargo = try LibvsyncTests.run(
            ["cargo", "build", "--offline", "--quiet", "--example", "ticks", "--manifest-path",
             repository.appendingPathComponent("bindings/rust/Cargo.toml").path],
            environment: ["LIBVSYNC_DIR": lib.path, "CARGO_TARGET_DIR": target])
        try #require(cargo.status == 0, "cargo build failed: \(cargo.output)")
        let rust = try LibvsyncTests.withoutToolchain(
            "'\(target)/debug/examples/ticks' --socket '\(daemon.socketPath)' --fps 30 --frames 10")
        #expect(rust.status == 0, "\(rust.output)")
        LibvsyncTests.expectTicks(rust.output, count: 10, divisor: 2)
        #expect(rust.output.contains("10 frames; display 60.000 Hz (max 60 fps)"), "\(rust.output)")

        // Python: pip install of the package into a fresh virtualenv (pip fetches setuptools to build it).
        let venv = work.appendingPathComponent("venv").path
        let setup = try LibvsyncTests.run(["sh", "-c", """
            python3 -m venv '\(venv)' && '\(venv)/bin/pip' install --quiet \
              '\(repository.appendingPathComponent("bindings/python").path)'
            """])
        try #require(setup.status == 0, "venv + pip install failed: \(setup.output)")
        let example = repository.appendingPathComponent("bindings/python/examples/ticks.py").path
        let environment = ["VSYNC_LIB": lib.appendingPathComponent("libvsync.so.1").path]
        for mode in ["", " --asyncio"] {
            let python = try LibvsyncTests.withoutToolchain(
                "'\(venv)/bin/python' '\(example)' --socket '\(daemon.socketPath)' --fps 20 --frames 8\(mode)",
                environment: environment)
            #expect(python.status == 0, "\(mode): \(python.output)")
            LibvsyncTests.expectTicks(python.output, count: 8, divisor: 3)
            #expect(python.output.contains("8 frames; display 60.000 Hz (max 60 fps)"), "\(python.output)")
        }
    }
}
