/// What one ``FrameWork`` did, counted by request. Every request ends in exactly one of
/// `committed`, `coalesced` or one of the cancelled kinds, so once nothing is outstanding
/// `requested == committed + cancelled + coalesced`.
public struct FrameWorkCounts: Sendable, Equatable {
    /// Calls of ``FrameWork/request(_:for:work:)`` and ``FrameWork/requestTask(_:for:work:)``.
    public var requested = 0
    /// Requests replaced by a newer one for the same key before the frame started them: ten
    /// requests for one key in a frame cost one run.
    public var coalesced = 0
    /// Results committed on the link's context.
    public var committed = 0
    /// Runs given up (or results thrown away) because a newer request for the same key came,
    /// or ``FrameWork/cancelAll()`` was called.
    public var superseded = 0
    /// Runs given up (or results thrown away) because their target vblank's commit point passed.
    public var late = 0
    /// Runs whose work threw an error of its own (not a cancellation).
    public var failed = 0
    /// Requests given up because the link was invalidated: no frame of it will start or commit
    /// them. Made after the invalidation, a request is counted here at once.
    public var abandoned = 0
    /// Requests started and not yet committed or cancelled, plus those waiting for the next frame.
    public var outstanding = 0

    public init() {}

    /// Runs that did not commit: superseded, late, failed or abandoned.
    public var cancelled: Int { superseded + late + failed + abandoned }

    /// The counts of `self` since `earlier` (the gauge `outstanding` is `self`'s).
    public func since(_ earlier: FrameWorkCounts) -> FrameWorkCounts {
        var d = FrameWorkCounts()
        d.requested = requested - earlier.requested
        d.coalesced = coalesced - earlier.coalesced
        d.committed = committed - earlier.committed
        d.superseded = superseded - earlier.superseded
        d.late = late - earlier.late
        d.failed = failed - earlier.failed
        d.abandoned = abandoned - earlier.abandoned
        d.outstanding = outstanding
        return d
    }
}

/// Anything that counts frame work, for ``FrameMonitor`` to report next to its frames.
public protocol FrameWorkCounting: Sendable {
    var counts: FrameWorkCounts { get }
}

/// What a run of frame work gets: its target, and the check that turns true once its result
/// could no longer be committed (a newer request for its key, its target's commit point passed,
/// or the link was invalidated).
public struct FrameWorkRun: Sendable {
    /// The vblank the result is for.
    public let targetSequence: UInt64
    /// That vblank's predicted time (CLOCK_MONOTONIC ns).
    public let targetTimestampNanoseconds: UInt64
    /// When the result is expected to be committed (CLOCK_MONOTONIC ns): the time the link's
    /// frame for ``targetSequence`` is expected to start, estimated as this run's target less
    /// the lead its starting frame had on its own target. The result must be ready by then;
    /// finished later, it misses that frame and is counted `late`.
    ///
    /// The lead is how early the link's callbacks come: about one frame of the link's rate
    /// without a ``DisplayLink/workDuration`` (16 ms at 60 Hz), about the work duration less
    /// the delivery delay with one. The commit itself happens when that frame does, earlier or
    /// later than this estimate.
    public let commitDeadlineNanoseconds: UInt64
    let check: @Sendable () -> Bool

    /// True once the result would never be committed: stop at the next convenient point,
    /// before the expensive step. With ``FrameWork/requestTask(_:for:work:)``, the run's
    /// `Task` is cancelled too.
    public var isCancelled: Bool { check() }

    /// Throws `CancellationError` once ``isCancelled`` is true.
    public func checkCancellation() throws {
        if isCancelled { throw CancellationError() }
    }
}
