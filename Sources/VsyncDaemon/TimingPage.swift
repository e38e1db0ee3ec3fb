import CLinux
import CVsyncPage
import Glibc
import VsyncCore

/// The timing page (protocol 5, docs/PROTOCOL.md § 10): one sealed memfd every client maps
/// read-only, holding each display's last vblank and refresh model under a per-record seqlock.
/// The server owns it and is its only writer; a display holds the index of its slot.
final class TimingPage {
    /// The descriptor clients get: opened read-only, on a memfd sealed against growing,
    /// shrinking and any write but through the daemon's own mapping (F_SEAL_FUTURE_WRITE).
    let clientFD: Int32
    private let memfd: Int32
    private let base: UnsafeMutableRawPointer
    private var used = [Bool](repeating: false, count: Int(VSYNC_PAGE_RECORDS))

    static let size = Int(VSYNC_PAGE_SIZE)

    /// Makes, maps and seals the page. Fails with a line saying why (the daemon then serves
    /// without one: clients fall back to ticks).
    init() throws(DaemonError) {
        let fd = vsyncd_memfd_create("vsyncd-timing-page")
        guard fd >= 0 else { throw DaemonError("no timing page: memfd_create: \(errnoText(-fd))") }
        func fail(_ what: String, _ e: Int32) -> DaemonError {
            close(fd)
            return DaemonError("no timing page: \(what): \(errnoText(e))")
        }
        guard ftruncate(fd, off_t(Self.size)) == 0 else { throw fail("ftruncate", errno) }
        guard let map = mmap(nil, Self.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0), map != MAP_FAILED else {
            throw fail("mmap", errno)
        }
        // After the daemon's writable mapping exists: F_SEAL_FUTURE_WRITE keeps it and refuses
        // every later one, and write(2), to everybody.
        let rc = vsyncd_add_seals(fd, VSYNCD_F_SEAL_SHRINK | VSYNCD_F_SEAL_GROW | VSYNCD_F_SEAL_FUTURE_WRITE | VSYNCD_F_SEAL_SEAL)
        guard rc == 0 else {
            munmap(map, Self.size)
            throw fail("sealing (Linux 5.1 or newer needed)", -rc)
        }
        // A read-only descriptor of the same file for clients: the seals already refuse writes;
        // this also refuses them on kernels that would let a writable fd grow a page or seal it.
        let readOnly = open("/proc/self/fd/\(fd)", O_RDONLY | O_CLOEXEC)
        memfd = fd
        clientFD = readOnly >= 0 ? readOnly : fd
        base = map
        let header = base.assumingMemoryBound(to: vsync_page_header.self)
        header.pointee = vsync_page_header(
            magic: VSYNC_PAGE_MAGIC, layout: UInt16(VSYNC_PAGE_LAYOUT), header_size: UInt16(VSYNC_PAGE_HEADER_SIZE),
            page_size: VSYNC_PAGE_SIZE, record_offset: VSYNC_PAGE_HEADER_SIZE, record_size: VSYNC_PAGE_RECORD_SIZE,
            record_count: VSYNC_PAGE_RECORDS, server_pid: UInt32(getpid()),
            reserved: (0, 0, 0, 0, 0, 0, 0, 0, 0))
    }

    deinit {
        munmap(base, Self.size)
        if clientFD != memfd { close(clientFD) }
        close(memfd)
    }

    var message: ServerMessage {
        .timingPage(TimingPageMessage(pageSize: VSYNC_PAGE_SIZE, layout: UInt16(VSYNC_PAGE_LAYOUT)))
    }

    /// A free slot for a new display, or nil when the page is full (that display is not on it).
    func claimSlot() -> Int32? {
        guard let i = used.firstIndex(of: false) else { return nil }
        used[i] = true
        return Int32(i)
    }

    /// Empties `slot` (display_id 0) for the next display.
    func release(_ slot: Int32) {
        var empty = vsync_page_values()
        empty.updated_ns = monotonicNow()
        vsync_page_write(base, UInt32(slot), &empty)
        used[Int(slot)] = false
    }

    func write(_ slot: Int32, _ values: inout vsync_page_values) {
        vsync_page_write(base, UInt32(slot), &values)
    }
}
