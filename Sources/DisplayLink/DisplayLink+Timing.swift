import VsyncClientCore
import VsyncCore

// The timing page (protocol 5, docs/PROTOCOL.md § 10): a display's last vblank and refresh
// model, read from the page vsyncd shares with every client, with no syscall and no lock.
extension DisplayLink {
    /// A display's timing on the page: last vblank, the model's line, and
    /// ``VBlankTiming/nextVBlank(after:)`` for a software vsync timer.
    public typealias Timing = VBlankTiming
    /// Why no timing was read: no page yet (no connection, or a daemon without protocol 5), the
    /// display is not on the page, or its record stayed locked (a daemon killed mid-write).
    public typealias TimingError = TimingPageError

    /// Display `displayID`'s timing from vsyncd's timing page, through the connection the links
    /// on `socketPath` share (nil: `$VSYNCD_SOCKET`, else the default). The page comes with the
    /// connection, which exists while a link is running: keep one (``pageOnly`` if it only
    /// keeps the record current). After the daemon goes away the last page stays readable,
    /// frozen, until the next connection brings a new one.
    ///
    /// Safe from any thread, also while links deliver frames: it takes no lock and makes no
    /// syscall (see ``VsyncClientCore/TimingPageMapping``).
    public static func timing(of displayID: UInt32, socketPath: String? = nil) throws(TimingPageError) -> VBlankTiming {
        let connection = DisplayLinkConnection.shared(socketPath: DisplayLinkConnection.resolvedPath(socketPath))
        guard let page = connection.timingPage else { throw .noPage }
        return try page.timing(displayID: displayID)
    }

    /// The timing of this link's display (``currentDisplay``) from the timing page; throws
    /// ``TimingError/displayNotOnPage`` while the link has no display yet.
    public func displayTiming() throws(TimingPageError) -> VBlankTiming {
        guard let display = currentDisplay else { throw .displayNotOnPage }
        guard let page = connection.timingPage else { throw .noPage }
        return try page.timing(displayID: display.displayID)
    }
}
