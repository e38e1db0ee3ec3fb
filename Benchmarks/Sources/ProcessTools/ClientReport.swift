/// What one vsync-bench client measured: the JSON line vsync-bench-client prints when told to
/// stop, and vsync-bench reads back.
public struct ClientReport: Codable, Sendable {
    public var index: Int
    /// Callbacks while recording.
    public var received: UInt64
    /// Ticks missing from the sequence at this client's divisor, between recorded callbacks.
    public var lost: UInt64
    /// Sum of the frames' `skipped` counts (daemon and library coalescing) while recording.
    public var skipped: UInt64
    public var divisor: UInt64
    /// Latency histogram, ns: [value, count] for each non-empty HDR bucket.
    public var latencyNs: [[UInt64]]
    public var notes: [String]
    /// DisplayLink clients: from the vblank to the reader thread's read of the tick, ns, as
    /// `latencyNs` (the callback's own hop is the difference).
    public var readLatencyNs: [[UInt64]]?

    public init(
        index: Int, received: UInt64, lost: UInt64, skipped: UInt64, divisor: UInt64,
        latencyNs: [[UInt64]], notes: [String], readLatencyNs: [[UInt64]]? = nil
    ) {
        self.index = index
        self.received = received
        self.lost = lost
        self.skipped = skipped
        self.divisor = divisor
        self.latencyNs = latencyNs
        self.notes = notes
        self.readLatencyNs = readLatencyNs
    }
}
