internal import CVsyncPage
internal import CVsyncSys

#if !VSYNC_EMBEDDED
    import VsyncCore
#endif

/// Why no timing could be read from the page; `errno` is what libvsync returns negated.
public enum TimingPageError: Error, Sendable, Equatable {
    /// No page mapped: not connected yet, a daemon older than protocol 5, or one that could not
    /// make a page.
    case noPage
    /// The page has no record of that display.
    case displayNotOnPage
    /// The record's lock word stayed odd or kept moving for 1000 tries (a daemon killed
    /// mid-write leaves it odd).
    case torn

    public var errno: Int32 {
        switch self {
        case .noPage: ENODATA
        case .displayNotOnPage: ENOENT
        case .torn: EAGAIN
        }
    }
}

/// The daemon's timing page as this client mapped it (protocol 5, docs/PROTOCOL.md § 10).
///
/// Threads: only the thread that dispatches the client installs pages; reads may come from any
/// thread at the same time (DisplayLink reads on the caller's thread while its reader thread
/// dispatches). So the current page is one pointer published with release/acquire, and no
/// mapping is ever unmapped while this object lives: a page replaced by a reconnect stays mapped
/// (a reader may still hold it) until the object goes, with the client. That costs one page per
/// daemon restart, not per reconnect: a page whose file is already mapped is reused.
/// The seqlock (`vsync_page_read`) makes the record's read itself safe against the daemon's writes.
public final class TimingPageMapping: @unchecked Sendable {
    /// How many times a read retries a record being written before it gives up.
    public static let readTries: Int32 = 1000
    static let hintCount = 32

    private let current: UnsafeMutablePointer<UnsafeRawPointer?>
    /// Slot hints by display id modulo `hintCount`, read and written with relaxed atomics: a
    /// stale or shared one costs a scan, never a wrong answer (the locked read checks the id).
    private let hints: UnsafeMutablePointer<Int32>
    /// Every page mapped, with its file's identity; only the dispatching thread touches it.
    private var mappings: [(page: UnsafeRawPointer, size: UInt32, dev: UInt64, ino: UInt64)] = []

    init() {
        current = .allocate(capacity: 1)
        current.initialize(to: nil)
        hints = .allocate(capacity: Self.hintCount)
        hints.initialize(repeating: -1, count: Self.hintCount)
    }

    deinit {
        for m in mappings { vsync_sys_unmap(m.page, m.size) }
        current.deallocate()
        hints.deallocate()
    }

    /// A page is mapped and current.
    public var isMapped: Bool { vsync_sys_load_pointer(current) != nil }

    /// How many pages this client holds mapped (one per daemon it met that had a page). Read it
    /// on the dispatching thread (tests).
    public var mappedCount: Int { mappings.count }

    /// The current page's header field `server_pid`, or nil without a page.
    public var serverPID: UInt32? {
        guard let page = vsync_sys_load_pointer(current) else { return nil }
        return page.load(fromByteOffset: 24, as: UInt32.self)
    }

    /// Takes TIMING_PAGE's descriptor: maps `size` bytes read-only, closes `fd` either way, and
    /// makes the page current if its header checks out. False (and no page) when it does not.
    func install(fd: Int32, size: UInt32) -> Bool {
        var dev: UInt64 = 0
        var ino: UInt64 = 0
        var fileSize: Int64 = 0
        defer { _ = vsync_sys_close(fd) }
        guard vsync_sys_file_identity(fd, &dev, &ino, &fileSize) == 0, fileSize >= Int64(size) else { return false }
        if let known = mappings.first(where: { $0.dev == dev && $0.ino == ino && $0.size == size }) {
            publish(known.page)
            return true
        }
        guard let page = vsync_sys_map_shared_readonly(fd, size) else { return false }
        guard vsync_page_check(page, size) == 0 else {
            vsync_sys_unmap(page, size)
            return false
        }
        mappings.append((page, size, dev, ino))
        publish(page)
        return true
    }

    /// No current page (a new connection without one); the mappings stay for readers.
    func retire() { vsync_sys_store_pointer(current, nil) }

    private func publish(_ page: UnsafeRawPointer?) {
        vsync_sys_store_pointer(current, page)
        for i in 0..<Self.hintCount { vsync_sys_store_i32(hints + i, -1) }
    }

    /// Display `displayID`'s record, consistent (the seqlock), with no syscall.
    public func timing(displayID: UInt32) throws(TimingPageError) -> VBlankTiming {
        guard let page = vsync_sys_load_pointer(current) else { throw .noPage }
        guard displayID != 0 else { throw .displayNotOnPage }  // 0 marks a free slot
        let hint = hints + Int(displayID % UInt32(Self.hintCount))
        var slot = vsync_page_find(page, displayID, vsync_sys_load_i32(hint))
        var values = vsync_page_values()
        // Twice: the slot may change hands between the unlocked find and the locked read.
        for _ in 0..<2 {
            guard slot >= 0 else { throw .displayNotOnPage }
            guard vsync_page_read(page, UInt32(slot), &values, Self.readTries) == 0 else { throw .torn }
            if values.display_id == displayID {
                vsync_sys_store_i32(hint, slot)
                return VBlankTiming(values)
            }
            slot = vsync_page_find(page, displayID, -1)
        }
        throw .displayNotOnPage
    }
}

extension VBlankTiming {
    init(_ v: vsync_page_values) {
        self.init(
            displayID: v.display_id, generation: v.generation, flags: v.flags, lastSequence: v.last_sequence,
            lastTimestampNs: v.last_timestamp_ns, anchorSequence: v.anchor_sequence, anchorNs: v.anchor_ns,
            periodWholeNs: v.period_ns, periodFraction: v.period_frac, refreshMillihertz: v.refresh_mhz,
            minimumIntervalNs: v.min_interval_ns, maximumIntervalNs: v.max_interval_ns, updatedNs: v.updated_ns)
    }
}
