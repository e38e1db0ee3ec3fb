import Foundation
import Glibc
import Synchronization

/// The threads frame work runs on: a fixed set, one fewer than the active cores (at least one,
/// at most 16), sharing one line of runs.
///
/// - **Bounded**: a fixed set of threads, never a thread per request, so a burst of requests
///   cannot start more draws at once than there are threads (YYAsyncLayer's reason for its
///   pool of serial queues).
/// - **One line**: runs wait in the order their frames started them, and whichever thread is
///   free takes the first, so no run waits behind a long draw while another thread is idle.
///   When there are more runs than threads, the rest wait their turn in that order; a key
///   holds one place in the line, and a newer run for it takes over that place instead of
///   joining the end.
/// - **A core left for the link**: drawing for coming frames must not delay the callback that
///   shows this one. A pool as wide as the machine, kept busy, made the link's thread (and
///   vsyncd) wait for a core behind a draw; one thread fewer leaves a core free for them
///   however much is drawn (on one core, drawing and the link share it).
///
/// The threads keep the priority of the thread that made the pool. A lowered thread (nice, or
/// `SCHED_IDLE`/`SCHED_BATCH`) would pass its priority to every thread it starts, and a draw
/// starts threads without knowing it: libdispatch makes a new worker from whichever thread
/// first needs one (a `DispatchQueue.global()` block, a call to an actor, `Task.sleep`), and
/// an app's process cannot raise a thread back. The app's queues and tasks would then run at
/// the draw's priority.
public final class FrameWorkPool: Sendable {
    /// The process's pool, shared by every ``FrameWork`` that names no other.
    public static let shared = FrameWorkPool()

    /// One fewer than the active cores, at least 1, at most 16.
    public static var defaultThreadCount: Int {
        min(max(ProcessInfo.processInfo.activeProcessorCount - 1, 1), 16)
    }

    /// How the pool's threads are scheduled, for `vsync-bench-framework` to compare: the
    /// lowered ones are unsafe in an app (see ``FrameWorkPool``).
    @_spi(Benchmark)
    public enum Priority: Sendable, Equatable, CustomStringConvertible {
        /// As the thread that made the pool (what every public pool does).
        case inherited
        /// `n` (1…19) nicer than the thread that made the pool (nice is per thread on Linux).
        case nice(Int)
        /// `SCHED_BATCH`.
        case batch
        /// `SCHED_IDLE`.
        case idle

        public var description: String {
            switch self {
            case .inherited: "inherited"
            case .nice(let n): "nice+\(n)"
            case .batch: "batch"
            case .idle: "idle"
            }
        }
    }

    /// How many threads the pool has.
    public let threadCount: Int
    /// How its threads are scheduled.
    @_spi(Benchmark) public let priority: Priority
    private let line: RunLine

    /// A pool of `threadCount` threads (1…16; by default one fewer than the active cores).
    public convenience init(threadCount: Int = FrameWorkPool.defaultThreadCount) {
        self.init(threadCount: threadCount, priority: .inherited)
    }

    /// A pool whose threads are scheduled at `priority` (for measurements only).
    @_spi(Benchmark)
    public init(threadCount: Int = FrameWorkPool.defaultThreadCount, priority: Priority) {
        precondition((1...16).contains(threadCount), "FrameWorkPool: \(threadCount) threads is outside 1…16")
        if case .nice(let n) = priority {
            precondition((1...19).contains(n), "FrameWorkPool: nice \(n) is outside 1…19")
        }
        self.threadCount = threadCount
        self.priority = priority
        let line = RunLine()
        self.line = line
        for i in 0..<threadCount {
            // The threads hold the line, not the pool: releasing the pool ends them.
            let thread = Thread {
                let name = "FrameWork.\(i)"
                Thread.current.name = name
                DisplayLinkConnection.nameCurrentThread(name)
                Self.lower(to: priority)
                while let job = line.next() { job() }
            }
            thread.start()
        }
    }

    deinit { line.close(threads: threadCount) }

    /// Puts `job` at the end of the line; the first free thread runs it.
    func submit(_ job: @escaping @Sendable () -> Void) { line.append(job) }

    /// Applies `priority` to the calling thread (Linux: nice values and policies are per thread).
    private static func lower(to priority: Priority) {
        switch priority {
        case .inherited:
            return
        case .nice(let n):
            errno = 0
            let current = getpriority(Int32(PRIO_PROCESS.rawValue), 0)
            guard errno == 0 else { return }
            _ = setpriority(Int32(PRIO_PROCESS.rawValue), 0, min(current + Int32(n), 19))
        case .batch, .idle:
            // SCHED_BATCH (3) and SCHED_IDLE (5), which Glibc's module leaves out (they are
            // _GNU_SOURCE in <sched.h>). Neither needs a privilege.
            var param = sched_param(sched_priority: 0)
            _ = sched_setscheduler(0, priority == .batch ? 3 : 5, &param)
        }
    }
}

/// The pool's one line of jobs: appended by the committing contexts, taken by the threads.
private final class RunLine: Sendable {
    private struct Queue {
        var jobs: [(@Sendable () -> Void)?] = []
        var head = 0
    }

    private let queue = Mutex(Queue())
    /// One signal per job appended, and one per thread when the pool is released: a wait that
    /// finds the line empty only happens after that.
    private let ready = DispatchSemaphore(value: 0)

    func append(_ job: @escaping @Sendable () -> Void) {
        queue.withLock { $0.jobs.append(job) }
        ready.signal()
    }

    /// The next job, waiting for one; nil once the pool is released and the line is empty.
    func next() -> (@Sendable () -> Void)? {
        ready.wait()
        return queue.withLock { q in
            guard q.head < q.jobs.count else { return nil }
            let job = q.jobs[q.head]
            q.jobs[q.head] = nil
            q.head += 1
            if q.head == q.jobs.count {
                q.jobs.removeAll(keepingCapacity: true)
                q.head = 0
            }
            return job
        }
    }

    /// Wakes each thread once more than there are jobs: each ends at the empty line.
    func close(threads: Int) {
        for _ in 0..<threads { ready.signal() }
    }
}
