import CLinux
import CVsyncPage
import Glibc
import VsyncCore

/// The timing page (protocol 5, docs/PROTOCOL.md § 10): one sealed memfd every client maps
/// read-only, holding each display's last vblank and refresh model under a per-record seqlock.
/// The server owns it and is its only writer; a display holds the index of its slot.
final class TimingPage {
    private let memfd: FileDescriptor
    /// The descriptor clients get: the memfd reopened read-only (nil: the reopen failed, and
    /// clients get the memfd itself, whose seals still refuse every write).
    private let readOnly: FileDescriptor?
    private let base: UnsafeMutableRawPointer
    private var used = [Bool](repeating: false, count: Int(VSYNC_PAGE_RECORDS))

    static let size = Int(VSYNC_PAGE_SIZE)

    /// The descriptor clients get (`readOnly`, else the memfd): on a memfd sealed against
    /// growing, shrinking and any write but through the daemon's own mapping (F_SEAL_FUTURE_WRITE).
    let clientFD: Int32

    /// Makes, maps and seals the page. Fails with a line saying why (the daemon then serves
    /// without one: clients fall back to ticks).
    init() throws(DaemonError) {
        let made = vsyncd_memfd_create("vsyncd-timing-page")
        guard made >= 0 else { throw .timingPage(step: "memfd_create", errno: errno) }
        let fd = FileDescriptor(made)
        guard ftruncate(fd.raw, off_t(Self.size)) == 0 else { throw .timingPage(step: "ftruncate", errno: errno) }
        guard let map = mmap(nil, Self.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd.raw, 0), map != MAP_FAILED else {
            throw .timingPage(step: "mmap", errno: errno)
        }
        // After the daemon's writable mapping exists: F_SEAL_FUTURE_WRITE keeps it and refuses
        // every later one, and write(2), to everybody.
        guard vsyncd_add_seals(fd.raw, VSYNCD_F_SEAL_SHRINK | VSYNCD_F_SEAL_GROW | VSYNCD_F_SEAL_FUTURE_WRITE | VSYNCD_F_SEAL_SEAL) == 0
        else {
            let e = errno
            munmap(map, Self.size)
            throw .timingPage(step: "sealing (Linux 5.1 or newer needed)", errno: e)
        }
        // A read-only descriptor of the same file for clients: the seals already refuse writes;
        // this also refuses them on kernels that would let a writable fd grow a page or seal it.
        let reopened = open("/proc/self/fd/\(fd.raw)", O_RDONLY | O_CLOEXEC)
        clientFD = reopened >= 0 ? reopened : fd.raw
        readOnly = reopened >= 0 ? FileDescriptor(reopened) : nil
        memfd = fd
        base = map
        let header = base.assumingMemoryBound(to: vsync_page_header.self)
        header.pointee = vsync_page_header(
            magic: VSYNC_PAGE_MAGIC, layout: UInt16(VSYNC_PAGE_LAYOUT), header_size: UInt16(VSYNC_PAGE_HEADER_SIZE),
            page_size: VSYNC_PAGE_SIZE, record_offset: VSYNC_PAGE_HEADER_SIZE, record_size: VSYNC_PAGE_RECORD_SIZE,
            record_count: VSYNC_PAGE_RECORDS, server_pid: UInt32(getpid()),
            reserved: (0, 0, 0, 0, 0, 0, 0, 0, 0))
    }

    deinit { munmap(base, Self.size) }

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
