import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Runs commands inside the VM test bed (Tests/TestBed/vm-run.sh): a qemu guest with vkms, whose root
/// is the host's root, so host-built products run there as they are.
///
///     let probe = try GuestVM.productPath("vsync-probe")
///     let result = try await GuestVM.run([probe, "list"])
///     #expect(result.status == 0, "\(result)")
enum GuestVM {
    /// The package root: this file is Tests/VMTests/Support/GuestVM.swift.
    static let repositoryRoot: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent()  // Support
        .deletingLastPathComponent()  // VMTests
        .deletingLastPathComponent()  // Tests
        .deletingLastPathComponent()

    static var script: URL { repositoryRoot.appendingPathComponent("Tests/TestBed/vm-run.sh") }

    /// One VM at a time, process-wide: Swift Testing runs tests in parallel, and two TCG guests on
    /// two cores would starve each other (and the timing they measure).
    private static let queue = DispatchQueue(label: "GuestVM.serial")

    /// Boots a guest, runs `command` in it (cwd: the repository root) and returns its output and
    /// exit status. Throws `GuestVMError` when the test bed itself fails (no qemu or kernel, guest
    /// not up, timeout), never a mere non-zero status of the command.
    /// With `systemd`, systemd is the guest's PID 1 and runs `command` as a unit (vm-run.sh --systemd).
    /// `append`: more kernel command line (vm-run.sh --append, the 7.x test bed's).
    static func run(
        _ command: [String], timeout: Int = 300, env: [String: String] = [:], systemd: Bool = false,
        append: String? = nil, virtioGPU: Bool = false, hostTSC: Bool = false
    ) async throws -> GuestResult {
        let script = script.path
        guard FileManager.default.isExecutableFile(atPath: script) else {
            throw GuestVMError.scriptMissing(path: script)
        }
        var arguments = ["--timeout", String(timeout)]
        if systemd { arguments.append("--systemd") }
        if let append { arguments += ["--append", append] }
        if virtioGPU { arguments.append("--virtio-gpu") }
        if hostTSC { arguments.append("--host-tsc") }
        for (name, value) in env.sorted(by: { $0.key < $1.key }) {
            arguments += ["--env", "\(name)=\(value)"]
        }
        arguments += ["--"] + command
        let finalArguments = arguments
        return try await withCheckedThrowingContinuation { continuation in
            queue.async {
                continuation.resume(with: Result { try runBlocking(script: script, arguments: finalArguments) })
            }
        }
    }

    /// Absolute path of a product built alongside these tests. The test bundle lives in the same
    /// build directory as the products (`<scratch-path>/<triple>/debug`), so this follows
    /// `--scratch-path` whatever it is.
    static func productPath(_ name: String) throws -> String {
        let candidates = buildDirectories().map { $0.appendingPathComponent(name).path }
        if let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) {
            return found
        }
        throw GuestVMError.productMissing(name: name, path: candidates.first ?? name)
    }

    /// Absolute path of a product of the release build beside the tests' debug build
    /// (`<scratch-path>/<triple>/release`, what Scripts/build-release.sh and Scripts/package.sh
    /// build, and Scripts/test.sh runs before the tests). A release product older than its debug
    /// twin may be of older sources: that fails too, rather than measuring them.
    static func releaseProductPath(_ name: String) throws -> String {
        let debug = try productPath(name)
        let release = URL(fileURLWithPath: debug).deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("release").appendingPathComponent(name).path
        guard FileManager.default.isExecutableFile(atPath: release) else {
            throw GuestVMError.releaseProductMissing(name: name, path: release, reason: "it is not there")
        }
        let built = { (path: String) in
            (try? FileManager.default.attributesOfItem(atPath: path))?[.modificationDate] as? Date ?? .distantPast
        }
        guard built(release) >= built(debug) else {
            throw GuestVMError.releaseProductMissing(name: name, path: release, reason: "it is older than the debug build \(debug)")
        }
        return release
    }

    /// The build directory of this test process first; then, for odd runners, `.build*/debug`
    /// in the repository, newest first.
    private static func buildDirectories() -> [URL] {
        var directories: [URL] = []
        let executable = Bundle.main.executablePath ?? CommandLine.arguments.first ?? ""
        if !executable.isEmpty {
            var directory = URL(fileURLWithPath: executable).resolvingSymlinksInPath().deletingLastPathComponent()
            // On some platforms the tests are a bundle: <dir>/X.xctest/Contents/MacOS/X.
            while directory.pathComponents.contains(where: { $0.hasSuffix(".xctest") }) {
                directory.deleteLastPathComponent()
            }
            directories.append(directory)
        }
        let fileManager = FileManager.default
        let scratch = (try? fileManager.contentsOfDirectory(atPath: repositoryRoot.path)) ?? []
        let local = scratch.filter { $0.hasPrefix(".build") }
            .map { repositoryRoot.appendingPathComponent($0).appendingPathComponent("debug").resolvingSymlinksInPath() }
            .filter { fileManager.fileExists(atPath: $0.path) }
            .sorted { modificationDate($0) > modificationDate($1) }
        directories += local
        return directories
    }

    private static func modificationDate(_ url: URL) -> Date {
        let attributes = try? FileManager.default.attributesOfItem(atPath: url.path)
        return attributes?[.modificationDate] as? Date ?? .distantPast
    }

    /// Runs vm-run.sh to completion on the calling thread (the serial queue).
    private static func runBlocking(script: String, arguments: [String]) throws -> GuestResult {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: script)
        process.arguments = arguments
        process.currentDirectoryURL = repositoryRoot
        let stdout = Pipe()
        let stderr = Pipe()
        process.standardOutput = stdout
        process.standardError = stderr
        process.standardInput = FileHandle.nullDevice
        do {
            try withDefaultSignalMask { try process.run() }
        } catch {
            throw GuestVMError.launchFailed(path: script, reason: "\(error)")
        }
        // Both pipes are drained at once (stderr on another thread), so a chatty command can't
        // fill one pipe while we block reading the other.
        let stderrData = DataBox()
        let group = DispatchGroup()
        DispatchQueue.global().async(group: group) {
            stderrData.set(stderr.fileHandleForReading.readDataToEndOfFile())
        }
        let stdoutData = stdout.fileHandleForReading.readDataToEndOfFile()
        group.wait()
        process.waitUntilExit()

        let result = GuestResult(
            stdout: String(decoding: stdoutData, as: UTF8.self),
            stderr: String(decoding: stderrData.get(), as: UTF8.self),
            status: process.terminationStatus)
        // 125 with vm-run's own last line means the test bed failed, not the command.
        if result.status == 125,
            let last = result.stderr.split(separator: "\n").last, last.hasPrefix("vm-run:")
        {
            throw GuestVMError.testBedFailed(summary: String(last), detail: result.stderr)
        }
        if process.terminationReason == .uncaughtSignal {
            throw GuestVMError.testBedFailed(
                summary: "vm-run.sh killed by signal \(result.status)", detail: result.stderr)
        }
        return result
    }
}

/// Runs `body` with no signals blocked on this thread. Process starts its child with the calling
/// thread's signal mask, and Dispatch's worker threads block SIGTERM, SIGINT and more: vm-run.sh
/// and qemu would inherit that and ignore the SIGTERM that ends a timed-out guest.
private func withDefaultSignalMask<T>(_ body: () throws -> T) rethrows -> T {
    #if os(Linux)
    var none = sigset_t()
    var saved = sigset_t()
    sigemptyset(&none)
    pthread_sigmask(SIG_SETMASK, &none, &saved)
    defer { pthread_sigmask(SIG_SETMASK, &saved, nil) }
    #endif
    return try body()
}

/// Hands the stderr bytes from the reader thread to the waiting one.
/// @unchecked Sendable: `lock` guards `data`, the only state.
private final class DataBox: @unchecked Sendable {
    private let lock = NSLock()
    private var data = Data()
    func set(_ value: Data) { lock.withLock { data = value } }
    func get() -> Data { lock.withLock { data } }
}
