import CVsyncPageMaker
import Foundation
import Glibc
import Testing
import VsyncClientCore
import VsyncCore

/// A timing page made as vsyncd makes it (a sealed memfd, PROTOCOL.md § 10), for the scripted
/// server to send. Its memfd has a name of its own, so a test counts this process's descriptors
/// of exactly this page (`openDescriptors`) while other suites open and close theirs.
final class TestPage {
    let name: String
    private(set) var fd: Int32
    let page: UnsafeMutableRawPointer
    let size: UInt32

    init(size: UInt32 = VSYNC_PAGE_SIZE, seals: Int32 = PM_ALL_SEALS, magic: UInt32 = VSYNC_PAGE_MAGIC,
         layout: UInt16 = UInt16(VSYNC_PAGE_LAYOUT), headerPageSize: UInt32 = VSYNC_PAGE_SIZE) throws {
        name = "vsync-test-\(UInt64.random(in: 0...UInt64.max))"
        self.size = size
        var mapped: UnsafeMutableRawPointer?
        let fd = pm_make_page(name, size, 0, &mapped)
        guard fd >= 0, let mapped else { throw TestPageError(what: "memfd page: errno \(-fd)") }
        // The header before the seals, as the daemon does (F_SEAL_FUTURE_WRITE keeps this mapping).
        pm_write_header(mapped, magic, layout, headerPageSize)
        if seals != 0 {
            let rc = pm_add_seals(fd, seals)
            guard rc == 0 else { throw TestPageError(what: "seals: errno \(-rc)") }
        }
        self.fd = fd
        page = mapped
    }

    deinit {
        munmap(page, Int(max(size, VSYNC_PAGE_SIZE)))
        closeFD()
    }

    func closeFD() {
        if fd >= 0 { close(fd) }
        fd = -1
    }

    /// Writes record `slot` under the seqlock, as the daemon does on each vblank.
    func write(slot: UInt32, _ timing: VBlankTiming) {
        var v = vsync_page_values()
        v.display_id = timing.displayID; v.generation = timing.generation; v.flags = timing.flags
        v.last_sequence = timing.lastSequence; v.last_timestamp_ns = timing.lastTimestampNs
        v.anchor_sequence = timing.anchorSequence; v.anchor_ns = timing.anchorNs
        v.period_ns = timing.periodWholeNs; v.period_frac = timing.periodFraction
        v.refresh_mhz = timing.refreshMillihertz; v.min_interval_ns = timing.minimumIntervalNs
        v.max_interval_ns = timing.maximumIntervalNs; v.updated_ns = timing.updatedNs
        vsync_page_write(page, slot, &v)
    }

    /// This process's open descriptors of this page's memfd (by its unique name).
    var openDescriptors: Int {
        let dir = "/proc/self/fd"
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []
        return entries.filter { entry in
            ((try? FileManager.default.destinationOfSymbolicLink(atPath: dir + "/" + entry)) ?? "").contains(name)
        }.count
    }
}

struct TestPageError: Error, CustomStringConvertible {
    let what: String
    var description: String { what }
}

extension ScriptedServer {
    /// TIMING_PAGE with `fd` attached (SCM_RIGHTS), as the daemon sends it after WELCOME.
    func sendTimingPage(fd: Int32, pageSize: UInt32 = VSYNC_PAGE_SIZE, layout: UInt16 = UInt16(VSYNC_PAGE_LAYOUT)) {
        send(.timingPage(TimingPageMessage(pageSize: pageSize, layout: layout)), fd: fd)
    }

    /// Any message with a descriptor attached.
    func send(_ message: ServerMessage, fd attached: Int32) {
        let bytes = message.encoded()
        let n = bytes.withUnsafeBytes { pm_send_with_fd(fd, $0.baseAddress, $0.count, attached) }
        #expect(n == bytes.count, "scripted server could not send with a descriptor: errno \(-n)")
    }
}

extension Core {
    static let timing = VBlankTiming(
        displayID: 1, generation: 3, flags: VBlankTiming.on | VBlankTiming.current | 1, lastSequence: 1200,
        lastTimestampNs: 20_000_000_000, anchorSequence: 1000, anchorNs: 16_666_666_667 - 1_000_000,
        periodWholeNs: 16_666_666, periodFraction: 0x8000_0000, refreshMillihertz: 60_000, updatedNs: 20_000_100_000)

    /// A version 5 handshake whose TIMING_PAGE carries `page`'s descriptor.
    static func welcome(_ client: VsyncClient, _ server: ScriptedServer, page: TestPage?, pid: UInt32 = 42) {
        server.send(.welcome(Welcome(version: 5, serverFlags: [], serverPID: pid)))
        if let page { server.sendTimingPage(fd: page.fd, pageSize: page.size) }
        client.dispatch(timeoutMs: 1000)
        _ = try? server.received()
    }
}
