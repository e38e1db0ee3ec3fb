import Dispatch

/// The one place that decides whether the reader thread runs queue links' handlers inline,
/// inside `queue.sync` (one thread wake-up per tick instead of two). Part of the connection's
/// state, under its lock.
///
/// Inline only while every link of the connection has one context, the same queue, and it is
/// not the main queue (whose callbacks belong on the main thread). With links on several
/// contexts, queues are posted to with `async`, so no queue's backlog can hold up another's
/// links. Links only report the fact (their one queue, if they have one); this type decides.
struct InlineDelivery {
    /// Inline delivery makes the reader wait while the queue runs other work, and meanwhile
    /// nothing reads the socket: past the daemon's stall timeout (2 s by default) the daemon
    /// would cut the connection. A queue that once kept the reader waiting this long is used
    /// for long work, so the links go back to `async` delivery for good.
    static let waitLimitNs: UInt64 = 250_000_000

    /// Each link's one queue, or nil when it has another context or several.
    private var onlyQueues: [UInt32: DispatchQueue?] = [:]
    /// Set for good once the reader waited too long for the queue.
    private(set) var disabled = false
    /// The queue to read the socket on inside `sync`, or nil: deliver with `async`.
    private(set) var queue: DispatchQueue?

    mutating func set(_ id: UInt32, onlyQueue: DispatchQueue?) {
        onlyQueues[id] = .some(onlyQueue)
        decide()
    }

    mutating func remove(_ id: UInt32) {
        onlyQueues[id] = nil
        decide()
    }

    /// The reader waited `waitedNs` for the queue before it could read.
    mutating func waited(_ waitedNs: UInt64) {
        guard waitedNs > Self.waitLimitNs else { return }
        disabled = true
        decide()
    }

    private mutating func decide() {
        queue = nil
        guard !disabled else { return }
        var sole: DispatchQueue?
        for candidate in onlyQueues.values {
            guard let q = candidate, q.label != DispatchQueue.main.label, sole == nil || sole === q else { return }
            sole = q
        }
        queue = sole
    }
}
