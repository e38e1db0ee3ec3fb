import Foundation
import Testing

/// Scripts/lib.sh's `ensure_packages`, which every script (run.sh, test.sh, vm-run.sh) starts
/// with: on a fresh machine its first attempt must work, with no "E: Unable to locate package"
/// before a retry, and a package no source has must fail with one line of its own. Run against a
/// private apt state (APT_CONFIG): empty lists, one local file: repository that alone has the
/// package, and installs simulated, so nothing on this machine changes and no network is used.
@Suite(.serialized)
struct EnsurePackagesTests {
    /// A package only the private repository has, and one nobody has.
    static let known = "vsyncd-apt-probe", unknown = "vsyncd-apt-absent"

    struct Run { var status: Int32; var lines: [String] }

    /// A private apt state in a new directory: lists that know nothing yet (apt's own `auxfiles`
    /// and `partial`, as a fresh Debian image has them), a flat repository with `known`.
    static func privateApt() throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ensure-packages-\(UUID().uuidString.prefix(8))")
        for sub in ["repo", "lists/partial", "lists/auxfiles", "cache"] {
            try FileManager.default.createDirectory(at: dir.appendingPathComponent(sub), withIntermediateDirectories: true)
        }
        try """
            Package: \(known)
            Version: 1.0
            Architecture: all
            Maintainer: vsyncd tests <tests@invalid>
            Filename: ./\(known)_1.0_all.deb
            Size: 1000
            Description: a package only this private repository has

            """.write(to: dir.appendingPathComponent("repo/Packages"), atomically: true, encoding: .utf8)
        try "deb [trusted=yes] file:\(dir.path)/repo ./\n".write(to: dir.appendingPathComponent("sources.list"), atomically: true, encoding: .utf8)
        try """
            Dir::State::Lists "\(dir.path)/lists";
            Dir::Cache "\(dir.path)/cache";
            Dir::Etc::SourceList "\(dir.path)/sources.list";
            Dir::Etc::SourceParts "\(dir.path)/no-parts";
            Acquire::Languages "none";
            APT::Get::Simulate "true";

            """.write(to: dir.appendingPathComponent("apt.conf"), atomically: true, encoding: .utf8)
        return dir
    }

    /// `bash -c SCRIPT` in the repository with lib.sh sourced and apt pointed at `apt`.
    static func bash(_ script: String, apt: URL) throws -> Run {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = ["-c", ". Scripts/lib.sh; " + script]
        process.currentDirectoryURL = GuestVM.repositoryRoot
        var env = ProcessInfo.processInfo.environment
        env["APT_CONFIG"] = apt.appendingPathComponent("apt.conf").path
        env["VSYNCD_APT_UPDATE"] = nil
        process.environment = env
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Run(status: process.terminationStatus, lines: String(decoding: data, as: UTF8.self).split(separator: "\n").map(String.init))
    }

    @Test func theFirstAttemptWorksWhenTheListsDoNotKnowThePackage() throws {
        let apt = try Self.privateApt()
        defer { try? FileManager.default.removeItem(at: apt) }
        let before = try Self.bash("apt_knows \(Self.known)", apt: apt)
        #expect(before.status != 0, "the private lists knew \(Self.known) before any update: \(before.lines)")

        let run = try Self.bash("ensure_packages \(Self.known)", apt: apt)
        guard getuid() == 0 else {
            // Not root: one line saying what to run, and apt untouched.
            #expect(run.status != 0 && run.lines.count == 1 && run.lines[0].contains("sudo apt-get install \(Self.known)"), "\(run.lines)")
            return
        }
        let errors = run.lines.filter { $0.hasPrefix("E:") || $0.hasPrefix("W:") }
        #expect(run.status == 0 && errors.isEmpty, "ensure_packages on lists that did not know \(Self.known): \(run.lines)")
        #expect(run.lines.contains { $0.hasPrefix("Inst \(Self.known) ") }, "no (simulated) install of \(Self.known): \(run.lines)")
        let after = try Self.bash("apt_knows \(Self.known)", apt: apt)
        #expect(after.status == 0, "the lists still do not know \(Self.known) after ensure_packages")

        // Lists that know the package: installed straight away, as quietly.
        let again = try Self.bash("ensure_packages \(Self.known)", apt: apt)
        #expect(again.status == 0 && !again.lines.contains { $0.hasPrefix("E:") }, "\(again.lines)")
    }

    @Test func aPackageNoSourceHasFailsWithOneLineOfItsOwn() throws {
        let apt = try Self.privateApt()
        defer { try? FileManager.default.removeItem(at: apt) }
        let run = try Self.bash("ensure_packages \(Self.known) \(Self.unknown); echo \"status $?\"", apt: apt)
        guard getuid() == 0 else {
            #expect(run.status != 0 && run.lines.count == 1 && run.lines[0].contains("sudo apt-get install \(Self.known) \(Self.unknown)"), "\(run.lines)")
            return
        }
        // ensure_packages exits the shell (die): no status line, and its one line is the last.
        #expect(run.status == 1 && !run.lines.contains { $0.hasPrefix("status ") }, "\(run.lines)")
        // apt's reason once (one attempt after the update, not a retry that repeats it), then ours.
        let errors = run.lines.filter { $0.hasPrefix("E:") }
        #expect(errors == ["E: Unable to locate package \(Self.unknown)"], "\(run.lines)")
        let last = run.lines.last ?? ""
        #expect(last.contains("could not install \(Self.known) \(Self.unknown)") && last.contains("apt-get install"), "\(run.lines)")
    }
}
