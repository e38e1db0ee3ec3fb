import Dispatch
import Synchronization

// FrameWork's bookkeeping: the requests of the coming frame, each key's runs, the results
// waiting for their frame, and the counts. All of it under FrameWork's one lock.
extension FrameWork {
    typealias SyncWork = @Sendable (FrameWorkRun) throws -> Output
    typealias AsyncWork = @Sendable (FrameWorkRun) async throws -> Output

    enum Work: Sendable {
        case sync(SyncWork)
        case async(AsyncWork)
    }

    /// A request waiting for the next frame.
    struct Request: Sendable {
        let generation: UInt64
        let order: UInt64
        let target: Target
        let work: Work
    }

    /// One started run: its key's generation (the sentinel), its place in request order, its target.
    final class Run: Sendable {
        let key: Key
        let generation: UInt64
        let order: UInt64
        let targetSequence: UInt64
        let targetNs: UInt64
        let deadlineNs: UInt64
        let work: Work
        private let task = Mutex<Task<Void, Never>?>(nil)

        init(key: Key, request: Request, targetSequence: UInt64, targetNs: UInt64, deadlineNs: UInt64) {
            self.key = key
            generation = request.generation
            order = request.order
            self.targetSequence = targetSequence
            self.targetNs = targetNs
            self.deadlineNs = deadlineNs
            work = request.work
        }

        func attach(_ task: Task<Void, Never>) { self.task.withLock { $0 = task } }
        func cancelTask() { task.withLock { $0 }?.cancel() }
    }

    struct Ready: Sendable {
        let run: Run
        let output: Output
    }

    struct KeyState {
        /// Requests made for the key so far: a run whose generation is older is superseded.
        var generation: UInt64 = 0
        /// Started, its pool block not yet begun (at most one: a newer run replaces it).
        var waiting: Run?
        /// On a pool queue now (more than one only while superseded runs reach their next check).
        var executing: [Run] = []
        /// Done, waiting for its target's frame.
        var ready: Ready?
    }

    /// Peaks, for tests: how far the pool's bounds were approached.
    struct Peaks: Sendable, Equatable {
        var executing = 0
        var waitingPerKey = 0
        var inFlightPerKey = 0
    }

    struct State {
        var pending: [Key: Request] = [:]
        var keys: [Key: KeyState] = [:]
        var nextOrder: UInt64 = 0
        /// The newest target whose commit point came (the last frame ``FrameWork/advance(to:requesting:)`` took).
        var committedThrough: UInt64 = 0
        var counts = FrameWorkCounts()
        var executing = 0
        var peaks = Peaks()

        /// The commit half of ``FrameWork/advance(to:requesting:)``: the results for `frame`'s
        /// target (on time only), and the runs that missed it.
        mutating func commits(for frame: DisplayLink.Frame, now: UInt64) -> ([Ready], [Run])? {
            guard frame.targetSequence > committedThrough else { return nil }
            committedThrough = frame.targetSequence
            let onTime = now < frame.targetTimestampNanoseconds
            var due: [Ready] = []
            var late: [Run] = []
            for k in Array(keys.keys) {
                if let ready = keys[k]?.ready, ready.run.targetSequence <= frame.targetSequence {
                    keys[k]?.ready = nil
                    counts.outstanding -= 1
                    if ready.run.targetSequence == frame.targetSequence && onTime {
                        due.append(ready)
                        counts.committed += 1
                    } else {
                        counts.late += 1
                    }
                }
                late += keys[k]?.executing.filter { $0.targetSequence <= frame.targetSequence } ?? []
            }
            due.sort { $0.run.order < $1.run.order }
            return (due, late)
        }

        /// The start half: a run for each key requested since the last frame, the newest
        /// request's, in request order. Returns the keys to send a pool block for. The
        /// commit point of a run's target is expected as long before it as this one came
        /// before `frame`'s target.
        mutating func starts(for frame: DisplayLink.Frame, now: UInt64) -> [Key] {
            let lead = frame.targetTimestampNanoseconds > now ? frame.targetTimestampNanoseconds - now : 0
            var starts: [Key] = []
            for (k, request) in pending.sorted(by: { $0.value.order < $1.value.order }) {
                let (sequence, ns) = Self.target(request.target.index, of: frame)
                let run = Run(key: k, request: request, targetSequence: sequence, targetNs: ns,
                              deadlineNs: ns > lead ? ns - lead : 0)
                var state = keys[k] ?? KeyState()
                if state.waiting != nil {
                    counts.superseded += 1  // replaced before a queue took it
                    counts.outstanding -= 1
                }
                // A block on the next queue in turn even when one waits already: that one may
                // sit behind a long run, and whichever queue is free first takes the key's run
                // (the other block then finds none and ends at once).
                starts.append(k)
                state.waiting = run
                peaks.waitingPerKey = max(peaks.waitingPerKey, 1)
                peaks.inFlightPerKey = max(peaks.inFlightPerKey, state.executing.count + 1)
                keys[k] = state
            }
            pending = [:]
            return starts
        }

        /// Vblank `index` after `frame`'s target (0: the target), from its timelines, or
        /// extrapolated at the link's interval when the daemon sent fewer (protocol 1).
        static func target(_ index: Int, of frame: DisplayLink.Frame) -> (UInt64, UInt64) {
            let timelines = frame.frameTimelines
            if index < timelines.count { return (timelines[index].sequence, timelines[index].presentationNs) }
            let base = timelines.first ?? FrameTimeline(sequence: frame.targetSequence, presentationNs: frame.targetTimestampNanoseconds)
            let (stepSequence, stepNs): (UInt64, UInt64) = timelines.count >= 2
                ? (timelines[1].sequence - timelines[0].sequence, timelines[1].presentationNs - timelines[0].presentationNs)
                : (max(frame.targetSequence &- frame.sequence, 1), frame.targetTimestampNanoseconds &- frame.timestampNanoseconds)
            let n = UInt64(index)
            return (base.sequence + n * stepSequence, base.presentationNs + n * stepNs)
        }

        /// A pool queue begins the key's waiting run.
        mutating func begin(_ k: Key) -> Run? {
            guard let run = keys[k]?.waiting else { return nil }
            keys[k]?.waiting = nil
            keys[k]?.executing.append(run)
            executing += 1
            peaks.executing = max(peaks.executing, executing)
            peaks.inFlightPerKey = max(peaks.inFlightPerKey, keys[k]?.executing.count ?? 0)  // the waiting one began
            return run
        }

        /// A run ended: its result waits for its frame, unless a newer request or the clock
        /// overtook it.
        mutating func finish(_ run: Run, _ result: Result<Output, any Error>, now: UInt64) {
            keys[run.key]?.executing.removeAll { $0 === run }
            executing -= 1
            let superseded = keys[run.key]?.generation != run.generation
            let late = committedThrough >= run.targetSequence || now >= run.targetNs
            if !superseded && !late, case .success(let output) = result {
                keys[run.key]?.ready = Ready(run: run, output: output)
                return
            }
            counts.outstanding -= 1
            if superseded {
                counts.superseded += 1
            } else if late {
                counts.late += 1
            } else {
                counts.failed += 1
            }
        }
    }
}

/// The result of async work, handed from its task to the pool queue that waits for it.
final class Outcome<Output: Sendable>: Sendable {
    private let value = Mutex<Result<Output, any Error>?>(nil)
    private let done = DispatchSemaphore(value: 0)

    func set(_ result: Result<Output, any Error>) {
        value.withLock { $0 = result }
        done.signal()
    }

    func wait() -> Result<Output, any Error> {
        done.wait()
        return value.withLock { $0! }
    }
}
