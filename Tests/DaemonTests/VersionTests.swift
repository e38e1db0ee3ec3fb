import Foundation
import Testing
import VsyncCore

/// `--version` on both programs, from the one place the version is written.
@Suite("--version")
struct VersionTests {
    @Test(arguments: ["vsyncd", "vsync-probe"])
    func printsTheOneVersion(program: String) throws {
        let result = try Command.run([try DaemonProcess.binary(program), "--version"])
        #expect(result.status == 0)
        #expect(result.output == VsyncVersion.string + "\n")
    }
}
