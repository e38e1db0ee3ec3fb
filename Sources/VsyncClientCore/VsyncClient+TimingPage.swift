internal import CVsyncPage
internal import CVsyncSys

#if !VSYNC_EMBEDDED
    import VsyncCore
#endif

// The timing page (protocol 5, docs/PROTOCOL.md § 10): the descriptor TIMING_PAGE brings, and
// reads of a display's record from the page without a syscall.
extension VsyncClient {
    /// Display `displayID`'s last vblank and refresh model, read from the timing page with no
    /// syscall. Throws ``TimingPageError/noPage`` before the first protocol 5 connection (a
    /// page-only user subscribes with ``SubscribeFlags/pageOnly`` so the client connects and the
    /// record stays current), ``TimingPageError/displayNotOnPage`` for a display the page does
    /// not hold, ``TimingPageError/torn`` when the record stayed locked for 1000 tries. After a
    /// hang-up the last page stays readable (its records stop moving) until the next one comes.
    /// Safe from any thread, also while another dispatches (see ``TimingPageMapping``).
    public func displayTiming(displayID: UInt32) throws(TimingPageError) -> VBlankTiming {
        try timingPage.timing(displayID: displayID)
    }

    /// Page only, or not: a page-only subscription gets no ticks; it keeps its display's record
    /// on the page current (protocol 5).
    public func setPageOnly(_ id: UInt32, _ on: Bool) { setFlag(.pageOnly, on, for: id) }

    /// A new connection. Below protocol 5 there is no page: the previous one stops being
    /// current (it stays mapped for readers). From 5 the previous page stays current until the
    /// message after WELCOME: a TIMING_PAGE confirms (the same daemon's page) or replaces it,
    /// anything else means this daemon has none (``afterWelcome(_:)``), so a reconnect to the
    /// same daemon never leaves a reader without a page.
    func welcomed(version: UInt16) {
        if version < 5 { timingPage.retire() }
        awaitingPage = version >= 5
    }

    /// The first message after a protocol 5 WELCOME: anything but TIMING_PAGE says no page.
    func afterWelcome(_ message: ServerMessage) {
        guard awaitingPage else { return }
        if case .welcome = message { return }
        awaitingPage = false
        if case .timingPage = message { return }
        timingPage.retire()
    }

    /// After a handshake that promises a page: reads on until TIMING_PAGE (or anything else,
    /// which says there is none) came, up to 100 ms, so a page read right after connect()
    /// finds it. The daemon sends both in one turn, so this rarely waits at all.
    func awaitTimingPage(until deadline: UInt64) {
        let end = min(deadline, vsync_sys_now_ns() &+ 100_000_000)
        while awaitingPage && ready && socketFD >= 0 {
            let now = vsync_sys_now_ns()
            guard now < end else { break }
            _ = vsync_sys_epoll_wait(epollFD, Int32(max(1, (end - now) / 1_000_000)))
            process(now: vsync_sys_now_ns())
        }
    }

    /// TIMING_PAGE with its descriptor (or -1 without one: no page). Takes ownership of `fd`.
    func receivedTimingPage(_ message: TimingPageMessage, fd: Int32) {
        let version = welcomeMessage?.version ?? 0
        // Only a protocol 5 connection sends it, once, with a layout this reader knows and a
        // sane size; anything else is not a page to trust (and without a descriptor there is
        // none). The header is checked after mapping.
        guard fd >= 0, ready, version >= 5, message.layout == UInt16(VSYNC_PAGE_LAYOUT),
            message.pageSize >= VSYNC_PAGE_SIZE, message.pageSize <= 1 << 20
        else {
            if fd >= 0 { _ = vsync_sys_close(fd) }
            timingPage.retire()
            return
        }
        if !timingPage.install(fd: fd, size: message.pageSize) { timingPage.retire() }
    }
}
