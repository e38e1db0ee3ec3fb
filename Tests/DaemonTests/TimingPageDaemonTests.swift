import CLinux
import CVsyncPage
import Foundation
import Glibc
import Testing
import VsyncCore
@testable import VsyncClientCore  // VBlankTiming from a page record, as the client core reads it
@testable import VsyncDaemon

/// The timing page (protocol 5) as vsyncd serves it: one sealed memfd, passed after WELCOME,
/// whose records follow the vblanks the daemon gets. Clients here read it as PROTOCOL.md § 10
/// says, through the same seqlock reader the client libraries use.
extension VsyncdTests {
    @Suite("vsyncd timing page (scripted source and timer source)") struct TimingPage {
        typealias Changes = DisplayChanges

        /// A mapped page and the reads a client makes of it.
        final class MappedPage {
            let base: UnsafeMutableRawPointer
            init(fd: Int32) throws {
                guard let map = mmap(nil, Int(VSYNC_PAGE_SIZE), PROT_READ, MAP_SHARED, fd, 0), map != MAP_FAILED else {
                    throw HarnessError("mmap of the timing page: \(String(cString: strerror(errno)))")
                }
                base = map
            }
            deinit { munmap(base, Int(VSYNC_PAGE_SIZE)) }

            var header: vsync_page_header { base.load(as: vsync_page_header.self) }

            func record(_ displayID: UInt32) -> vsync_page_values? {
                let slot = vsync_page_find(base, displayID, -1)
                guard slot >= 0 else { return nil }
                var v = vsync_page_values()
                guard vsync_page_read(base, UInt32(slot), &v, 1000) == 0, v.display_id == displayID else { return nil }
                return v
            }
        }

        /// The next datagram and the descriptor on it (-1 if none).
        static func receiveWithFD(_ client: RawClient, timeout: Double = 2) -> (ServerMessage?, Int32) {
            var pfd = pollfd(fd: client.fd, events: Int16(POLLIN), revents: 0)
            guard poll(&pfd, 1, Int32(timeout * 1000)) > 0 else { return (nil, -1) }
            var buffer = [UInt8](repeating: 0, count: 4096)
            var fd: Int32 = -1
            let n = buffer.withUnsafeMutableBytes { vsyncd_recv_with_fd(client.fd, $0.baseAddress, $0.count, &fd) }
            guard n > 0 else { return (nil, fd) }
            return ((try? ServerMessage.decode(Array(buffer[0..<n])) ?? nil), fd)
        }

        /// HELLO at `version`, then the WELCOME and, at 5, the TIMING_PAGE and its descriptor.
        static func connect(_ path: String, version: UInt16) throws -> (RawClient, TimingPageMessage?, Int32) {
            let client = try RawClient(path: path)
            client.send(.hello(Hello(minVersion: 1, maxVersion: version, clientName: "page-test")))
            guard case (.welcome(let w)?, -1) = receiveWithFD(client), w.version == version else {
                throw HarnessError("no WELCOME at version \(version)")
            }
            guard version >= 5 else { return (client, nil, -1) }
            guard case (.timingPage(let page)?, let fd) = receiveWithFD(client) else { throw HarnessError("no TIMING_PAGE") }
            return (client, page, fd)
        }

        @Test func aVersion5ClientGetsASealedPageItCanOnlyRead() throws {
            let source = ScriptedVBlankSource(displays: [Changes.virtual1(hz: 60)])
            let daemon = try InProcessDaemon(source: source)
            defer { daemon.stop() }
            let (client, message, fd) = try Self.connect(daemon.socketPath, version: 5)
            defer { _ = client }
            #expect(message == TimingPageMessage(pageSize: 4096, layout: 1))
            try #require(fd >= 0, "TIMING_PAGE came without its descriptor")
            defer { close(fd) }

            // (Linux 6.3+ adds F_SEAL_EXEC for MFD_NOEXEC_SEAL.)
            let seals = fcntl(fd, VSYNCD_F_GET_SEALS)
            let wanted = VSYNCD_F_SEAL_SHRINK | VSYNCD_F_SEAL_GROW | VSYNCD_F_SEAL_FUTURE_WRITE | VSYNCD_F_SEAL_SEAL
            #expect(seals >= 0 && seals & wanted == wanted, "seals 0x\(String(seals, radix: 16))")
            #expect(fcntl(fd, F_GETFL) & O_ACCMODE == O_RDONLY)
            // Neither the descriptor given nor the file reopened read-write lets a client change
            // a byte another client reads.
            let shared = mmap(nil, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
            #expect(shared == MAP_FAILED && errno == EACCES)
            let rw = open("/proc/self/fd/\(fd)", O_RDWR | O_CLOEXEC)
            try #require(rw >= 0, "reopening the memfd read-write: \(String(cString: strerror(errno)))")
            defer { close(rw) }
            let writable = mmap(nil, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, rw, 0)
            #expect(writable == MAP_FAILED && errno == EPERM)
            var byte: UInt8 = 1
            #expect(write(rw, &byte, 1) == -1 && errno == EPERM)
            #expect(ftruncate(rw, 8192) == -1 && errno == EPERM)
            #expect(ftruncate(rw, 0) == -1 && errno == EPERM)
            #expect(fcntl(rw, VSYNCD_F_ADD_SEALS, Int32(VSYNCD_F_SEAL_SEAL)) == -1 && errno == EPERM)

            let page = try MappedPage(fd: fd)
            #expect(vsync_page_check(page.base, 4096) == 0)
            #expect(page.header.server_pid == UInt32(getpid()))
        }

        @Test(.timeLimit(.minutes(1)))
        func recordsFollowTheVBlanksOfAPageOnlySubscription() throws {
            let source = ScriptedVBlankSource(displays: [Changes.virtual1(hz: 60)])
            let daemon = try InProcessDaemon(source: source)
            defer { daemon.stop() }
            let (client, _, fd) = try Self.connect(daemon.socketPath, version: 5)
            try #require(fd >= 0)
            let page = try MappedPage(fd: fd)
            close(fd)

            // Known before anyone follows it: lit, not current, not yet measured.
            client.send(.listDisplays)
            guard case .message(.displayList(let list)) = client.receive(), let display = list.first else {
                Issue.record("no DISPLAY_LIST"); return
            }
            let first = try #require(page.record(display.displayID), "display \(display.displayID) is not on the page")
            #expect(first.flags & VSYNC_PAGE_ON != 0 && first.flags & VSYNC_PAGE_CURRENT == 0)
            #expect(first.period_ns == 0 && first.generation == display.generation)
            #expect(first.refresh_mhz == display.refreshMillihertz)

            // A pageOnly subscription turns vblank events on and gets no ticks.
            let sub = try client.subscribe(1, fps: 60, flags: .pageOnly, selector: .connector("Virtual-1"))
            #expect(waitUntil(timeout: 2) { source.isActive(Changes.key) })
            // Events are on (the daemon turns them on before SUBSCRIBED), but no vblank has come:
            // nothing on the record is current yet.
            let waiting = try #require(page.record(sub.displayID))
            #expect(waiting.flags & VSYNC_PAGE_CURRENT == 0 && waiting.last_sequence == 0 && waiting.period_ns == 0)
            let start: UInt64 = 5_000_000_000
            _ = Changes.vblanks(source, 100...159, hz: 60, start: start)
            let period = 1e9 / 60
            let lastTs = start + 59 * UInt64(period.rounded())
            #expect(waitUntil(timeout: 3) { page.record(sub.displayID)?.last_sequence == 159 })
            let record = try #require(page.record(sub.displayID))
            #expect(record.last_timestamp_ns == lastTs)
            #expect(record.flags & VSYNC_PAGE_CURRENT != 0 && record.flags & VSYNC_PAGE_ON != 0)
            #expect(record.flags & DisplayFlags.hardwareClock.rawValue != 0)
            let timing = VBlankTiming(record)
            #expect(abs(timing.periodNs - period) < 1, "period \(timing.periodNs)")
            let next = try #require(timing.nextVBlank(after: lastTs))
            #expect(next.sequence == 160)
            #expect(abs(Double(next.timestampNs) - Double(lastTs) - period) < 2, "\(next.timestampNs - lastTs)")
            #expect(client.drain().allSatisfy { if case .tick = $0 { false } else { true } }, "a pageOnly subscription got a TICK")

            // Off: the record says so at the off event's generation.
            source.update { $0[0] = Changes.virtual1(hz: 60, active: false) }
            source.push([.failed(Changes.key, .off)])
            let off = client.messages { if case .displayEvent(let e) = $0 { e.kind == .off } else { false } }
            guard case .displayEvent(let event)? = off.last else { Issue.record("no off event"); return }
            let dark = try #require(page.record(sub.displayID))
            #expect(dark.flags & VSYNC_PAGE_ON == 0 && dark.flags & VSYNC_PAGE_CURRENT == 0)
            #expect(dark.generation == event.display.generation && dark.generation != record.generation)
            #expect(dark.last_sequence == 159, "the last vblank stays")
        }

        @Test func olderClientsGetNoPageAndTicksAsBefore() throws {
            let source = ScriptedVBlankSource(displays: [Changes.virtual1(hz: 60)])
            let daemon = try InProcessDaemon(source: source)
            defer { daemon.stop() }
            let (client, _, _) = try Self.connect(daemon.socketPath, version: 4)
            // pageOnly is bit 2, reserved before version 5: ignored, so ticks come.
            _ = try client.subscribe(1, fps: 60, flags: .pageOnly, selector: .connector("Virtual-1"))
            #expect(waitUntil(timeout: 2) { source.isActive(Changes.key) })
            _ = Changes.vblanks(source, 100...103, hz: 60, start: 5_000_000_000)
            var fds: [Int32] = []
            var ticks = 0
            while ticks < 4, case (let m?, let fd) = Self.receiveWithFD(client) {
                if fd >= 0 { fds.append(fd); close(fd) }
                if case .tick = m { ticks += 1 }
                if case .timingPage = m { Issue.record("a version 4 client got TIMING_PAGE") }
            }
            #expect(ticks == 4 && fds.isEmpty)
        }

        /// The real daemon on the timer source: the record moves with its ticks, flagged synthetic.
        @Test(.timeLimit(.minutes(1)))
        func theTimerSourceWritesThePageToo() throws {
            let daemon = try DaemonProcess(hertz: 120)
            defer { _ = daemon.stop() }
            let (client, _, fd) = try Self.connect(daemon.socketPath, version: 5)
            try #require(fd >= 0)
            let page = try MappedPage(fd: fd)
            close(fd)
            let sub = try client.subscribe(1, fps: 120, flags: .pageOnly)
            #expect(waitUntil(timeout: 5) { (page.record(sub.displayID)?.last_sequence ?? 0) > 0 })
            let a = try #require(page.record(sub.displayID))
            #expect(waitUntil(timeout: 5) { (page.record(sub.displayID)?.last_sequence ?? 0) >= a.last_sequence + 12 })
            let b = try #require(page.record(sub.displayID))
            #expect(b.flags & DisplayFlags.synthetic.rawValue != 0 && b.flags & VSYNC_PAGE_CURRENT != 0)
            #expect(b.refresh_mhz == 120_000)
            // Consecutive reads agree with the grid: the later vblank where the earlier's line puts it.
            let predicted = VBlankTiming(a).timestamp(ofSequence: b.last_sequence)
            #expect(abs(Double(predicted) - Double(b.anchor_ns)) < 50_000, "\(predicted) vs \(b.anchor_ns)")
            #expect(page.header.server_pid == UInt32(daemon.process.processIdentifier))
        }
    }
}
