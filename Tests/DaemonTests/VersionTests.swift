import Foundation
import Testing
import VsyncCore

/// `--version` on both programs, from the one place the version is written.
@Suite("--version")
struct VersionTests {
    @Test(arguments: ["vsyncd", "vsync-probe"])
    func printsTheOneVersion(program: String) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try DaemonProcess.binary(program))
        process.arguments = ["--version"]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        #expect(output == VsyncVersion.string + "\n")
    }
}
