/// TIMING_PAGE (protocol 5): the daemon's shared timing page, whose file descriptor rides on the
/// datagram as SCM_RIGHTS. The message says what to map and which layout to expect; the page's
/// own header says it again, and a reader checks both before it trusts a byte (docs/PROTOCOL.md
/// § 10). A datagram of this type that arrives without a descriptor says there is no page.
public struct TimingPageMessage: Sendable, Equatable {
    /// Bytes to map (the page is this long and sealed against growing or shrinking).
    public var pageSize: UInt32
    /// The page's layout version (1); a reader that does not know it leaves the page unmapped.
    public var layout: UInt16
    public init(pageSize: UInt32, layout: UInt16) {
        self.pageSize = pageSize
        self.layout = layout
    }
}
