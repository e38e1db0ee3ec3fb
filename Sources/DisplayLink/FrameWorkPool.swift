import Dispatch
import Foundation
import Synchronization

/// The serial queues frame work runs on: one per active core, at most 16, taken in turn
/// (YYAsyncLayer's pool, seed 004). A fixed set of serial queues, never an unbounded concurrent
/// queue, so a burst of requests cannot start a thread per request: at most ``queueCount`` runs
/// execute at once, however many are asked for.
public final class FrameWorkPool: Sendable {
    /// The process's pool, shared by every ``FrameWork`` that names no other.
    public static let shared = FrameWorkPool()

    /// How many serial queues the pool has.
    public var queueCount: Int { queues.count }

    private let queues: [DispatchQueue]
    private let turn = Atomic<Int>(0)

    /// A pool of `queueCount` serial queues (default: the active cores, at most 16).
    public init(queueCount: Int = min(max(ProcessInfo.processInfo.activeProcessorCount, 1), 16)) {
        let count = min(max(queueCount, 1), 16)
        queues = (0..<count).map { DispatchQueue(label: "DisplayLink.FrameWork.\($0)", qos: .userInitiated) }
    }

    /// The next queue in turn.
    func nextQueue() -> DispatchQueue {
        let i = turn.add(1, ordering: .relaxed).oldValue
        return queues[i % queues.count]
    }
}

/// What one ``FrameWork`` did, counted by request. Every request ends in exactly one of
/// `committed`, `coalesced` or one of the cancelled kinds, so once nothing is outstanding
/// `requested == committed + cancelled + coalesced`.
public struct FrameWorkCounts: Sendable, Equatable {
    /// Calls of ``FrameWork/request(_:for:work:)`` (either form).
    public var requested = 0
    /// Requests replaced by a newer one for the same key before the frame started them: ten
    /// requests for one key in a frame cost one run.
    public var coalesced = 0
    /// Results committed on the link's context.
    public var committed = 0
    /// Runs given up (or results thrown away) because a newer request for the same key came.
    public var superseded = 0
    /// Runs given up (or results thrown away) because their target vblank's commit point passed.
    public var late = 0
    /// Runs whose work threw an error of its own (not a cancellation).
    public var failed = 0
    /// Requests started and not yet committed or cancelled, plus those waiting for the next frame.
    public var outstanding = 0

    public init() {}

    /// Runs that did not commit: superseded, late or failed.
    public var cancelled: Int { superseded + late + failed }

    /// The counts of `self` since `earlier` (the gauge `outstanding` is `self`'s).
    public func since(_ earlier: FrameWorkCounts) -> FrameWorkCounts {
        var d = FrameWorkCounts()
        d.requested = requested - earlier.requested
        d.coalesced = coalesced - earlier.coalesced
        d.committed = committed - earlier.committed
        d.superseded = superseded - earlier.superseded
        d.late = late - earlier.late
        d.failed = failed - earlier.failed
        d.outstanding = outstanding
        return d
    }
}

/// Anything that counts frame work, for ``FrameMonitor`` to report next to its frames.
public protocol FrameWorkCounting: Sendable {
    var counts: FrameWorkCounts { get }
}

/// What a run of frame work gets: its target, and the check that turns true once its result
/// could no longer be committed (a newer request for its key, or its target's commit point passed).
public struct FrameWorkRun: Sendable {
    /// The vblank the result is for.
    public let targetSequence: UInt64
    /// That vblank's predicted time (CLOCK_MONOTONIC ns).
    public let targetTimestampNanoseconds: UInt64
    /// The latest time the result can be committed: the target less the link's work duration.
    public let deadlineNanoseconds: UInt64
    let check: @Sendable () -> Bool

    /// True once the result would never be committed: stop at the next convenient point,
    /// before the expensive step. With async work, the run's `Task` is cancelled too.
    public var isCancelled: Bool { check() }

    /// Throws `CancellationError` once ``isCancelled`` is true.
    public func checkCancellation() throws {
        if isCancelled { throw CancellationError() }
    }
}
