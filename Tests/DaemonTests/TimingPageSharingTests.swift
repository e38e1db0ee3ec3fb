import CVsyncPage
import Foundation
import Glibc
import Testing
import VsyncCore

/// PROTOCOL.md § 10, "One page per daemon": the page is the daemon's one file, so every
/// connection gets a descriptor of it, and a mapping goes on moving after its connection ends.
extension VsyncdTests.TimingPage {
    @Test(.timeLimit(.minutes(1)))
    func onePageForEveryConnectionThatMovesAfterADisconnect() throws {
        let daemon = try DaemonProcess(hertz: 60)
        defer { _ = daemon.stop() }
        let (gone, _, goneFD) = try Self.connect(daemon.socketPath, version: 5)
        let (other, _, otherFD) = try Self.connect(daemon.socketPath, version: 5)
        try #require(goneFD >= 0 && otherFD >= 0)
        var a = stat(), b = stat()
        #expect(fstat(goneFD, &a) == 0 && fstat(otherFD, &b) == 0)
        #expect(a.st_dev == b.st_dev && a.st_ino == b.st_ino, "two connections got two files")
        close(otherFD)
        let page = try MappedPage(fd: goneFD)
        close(goneFD)
        gone.close()

        // Another connection makes the display's vblanks come; the closed connection's mapping
        // shows each of them: tick s + 1 means vblank s was written to the page before it.
        let sub = try other.subscribe(1, fps: 0)
        var seen = 0
        while seen < 10, let t = other.nextTick(timeout: 2) {
            let record = try #require(page.record(sub.displayID), "display \(sub.displayID) left the page")
            #expect(record.last_sequence + 1 >= t.sequence, "the mapping stopped at \(record.last_sequence), tick \(t.sequence)")
            seen += 1
        }
        #expect(seen == 10)
    }
}
