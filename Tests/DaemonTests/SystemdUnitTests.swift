import Foundation
import Testing

/// The units in systemd/ and Scripts/install.sh, checked with systemd's own tools
/// (Debian package systemd; `systemd-analyze` works without a running systemd).
@Suite("systemd units and install script")
struct SystemdUnitTests {
    static let repository = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static func run(_ arguments: [String]) throws -> (status: Int32, output: String) { try Command.run(arguments) }

    /// Installs the built binaries and the units into a staging directory with install.sh.
    static func stage() throws -> URL {
        let destdir = FileManager.default.temporaryDirectory.appendingPathComponent("vsyncd-install-\(UUID().uuidString.prefix(8))")
        let binDir = URL(fileURLWithPath: DaemonProcess.binaryPath).deletingLastPathComponent().path
        let result = try run([repository.appendingPathComponent("Scripts/install.sh").path,
                              "--bin-dir", binDir, "--destdir", destdir.path])
        try #require(result.status == 0, "install.sh failed: \(result.output)")
        return destdir
    }

    @Test func installStagesBinariesUnitsAndDocs() throws {
        let destdir = try Self.stage()
        defer { try? FileManager.default.removeItem(at: destdir) }
        for path in ["usr/local/bin/vsyncd", "usr/local/bin/vsync-probe"] {
            #expect(FileManager.default.isExecutableFile(atPath: destdir.appendingPathComponent(path).path), "\(path)")
        }
        for path in ["etc/systemd/system/vsyncd.service", "etc/systemd/system/vsyncd.socket",
                     "usr/local/share/doc/vsyncd/PROTOCOL.md"] {
            #expect(FileManager.default.fileExists(atPath: destdir.appendingPathComponent(path).path), "\(path)")
        }
        let service = try String(contentsOf: destdir.appendingPathComponent("etc/systemd/system/vsyncd.service"), encoding: .utf8)
        #expect(service.contains("\nExecStart=/usr/local/bin/vsyncd "))
    }

    /// An app built outside SwiftPM links the installed library the README's way
    /// (`swiftc -I PREFIX/lib/swift/vsyncd -L PREFIX/lib -lDisplayLinkShared`) and runs.
    @Test func installedLibraryLinksAnApp() throws {
        let destdir = try Self.stage()
        defer { try? FileManager.default.removeItem(at: destdir) }
        let lib = destdir.appendingPathComponent("usr/local/lib")
        try #require(FileManager.default.fileExists(atPath: lib.appendingPathComponent("libDisplayLinkShared.so").path))
        let source = destdir.appendingPathComponent("app.swift")
        try """
            import DisplayLink
            import Dispatch
            let link = DisplayLink { link in print(link.timestamp) }
            link.start(on: DispatchQueue(label: "app"))
            print("linked", link.isValid)
            link.invalidate()
            """.write(to: source, atomically: true, encoding: .utf8)
        let app = destdir.appendingPathComponent("app").path
        let build = try Self.run(["swiftc", source.path, "-I", lib.appendingPathComponent("swift/vsyncd").path,
                                  "-L", lib.path, "-lDisplayLinkShared", "-o", app])
        try #require(build.status == 0, "swiftc against the installed library failed: \(build.output)")
        let run = try Self.run(["env", "LD_LIBRARY_PATH=\(lib.path)", "VSYNCD_SOCKET=\(destdir.path)/none.sock", app])
        #expect(run.status == 0 && run.output.contains("linked true"), "\(run.output)")
    }

    /// `systemd-analyze verify` checks ExecStart's binary exists, so the staged service is pointed
    /// at the binary under test.
    @Test func unitsVerify() throws {
        let destdir = try Self.stage()
        defer { try? FileManager.default.removeItem(at: destdir) }
        let units = destdir.appendingPathComponent("etc/systemd/system")
        let servicePath = units.appendingPathComponent("vsyncd.service")
        let service = try String(contentsOf: servicePath, encoding: .utf8)
            .replacingOccurrences(of: "ExecStart=/usr/local/bin/vsyncd", with: "ExecStart=\(DaemonProcess.binaryPath)")
        try service.write(to: servicePath, atomically: true, encoding: .utf8)
        let result = try Self.run(["systemd-analyze", "verify", "--man=no", servicePath.path,
                                   units.appendingPathComponent("vsyncd.socket").path])
        #expect(result.status == 0, "\(result.output)")
        #expect(!result.output.contains("vsyncd."), "verify complained: \(result.output)")
    }

    /// seatd's hardened unit scores 1.9; ours must do at least as well.
    @Test func serviceExposureIsLow() throws {
        let path = Self.repository.appendingPathComponent("systemd/vsyncd.service").path
        let result = try Self.run(["systemd-analyze", "security", "--offline=true", path])
        let line = try #require(result.output.split(separator: "\n").first { $0.contains("Overall exposure level") },
                                "\(result.output)")
        let score = try #require(line.split(separator: ":").last?.split(separator: " ").first.flatMap { Double($0) })
        print("systemd-analyze security: \(line.trimmingCharacters(in: .whitespaces))")
        #expect(score <= 1.9)
    }

    /// The socket unit and the daemon agree on the path and mode the docs give.
    @Test func socketUnitMatchesDaemonDefaults() throws {
        let socket = try String(contentsOf: Self.repository.appendingPathComponent("systemd/vsyncd.socket"), encoding: .utf8)
        let lines = Set(socket.split(separator: "\n").map(String.init))
        #expect(lines.contains("ListenSequentialPacket=/run/vsyncd/vsyncd.sock"))
        // The daemon decides who may connect (DisplayAccess), so the socket is open to all.
        #expect(lines.contains("SocketMode=0666"))
        let service = try String(contentsOf: Self.repository.appendingPathComponent("systemd/vsyncd.service"), encoding: .utf8)
        for needed in ["DeviceAllow=char-drm rw", "ProtectSystem=strict", "RestrictAddressFamilies=AF_UNIX",
                       "NoNewPrivileges=yes", "SupplementaryGroups=video", "Type=notify", "WatchdogSec="] {
            #expect(service.contains(needed), "vsyncd.service lacks \(needed)")
        }
    }
}
