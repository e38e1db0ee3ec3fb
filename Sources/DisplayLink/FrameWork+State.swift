import Synchronization

// FrameWork's bookkeeping: the requests of the coming frame, each key's runs, the results
// waiting for their frame, the link followed, and the counts. All of it under FrameWork's one lock.
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

    /// One started run: its key's generation (the sentinel), its place in request order, its
    /// target, and the link it was started for (`epoch`).
    final class Run: Sendable {
        let key: Key
        let generation: UInt64
        let order: UInt64
        let epoch: UInt64
        let targetSequence: UInt64
        let targetNs: UInt64
        let commitDeadlineNs: UInt64
        let work: Work
        private let task = Mutex<Task<Void, Never>?>(nil)

        init(key: Key, request: Request, epoch: UInt64, targetSequence: UInt64, targetNs: UInt64, commitDeadlineNs: UInt64) {
            self.key = key
            generation = request.generation
            order = request.order
            self.epoch = epoch
            self.targetSequence = targetSequence
            self.targetNs = targetNs
            self.commitDeadlineNs = commitDeadlineNs
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
        /// Started, not yet taken by a pool thread (at most one: a newer run takes its place).
        var waiting: Run?
        /// On a pool thread now (more than one only while superseded runs reach their next check).
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
        /// The newest target whose commit point came (the last frame ``FrameWork/advance(_:frame:commit:requesting:)`` took).
        var committedThrough: UInt64 = 0
        /// The link followed, and the runs started for it: every change of link (or its
        /// invalidation) bumps `epoch`, so runs of an earlier one never commit.
        var link = FollowedLink()
        var epoch: UInt64 = 0
        var counts = FrameWorkCounts()
        var executing = 0
        var peaks = Peaks()

        mutating func enqueue(_ key: Key, _ target: Target, _ work: Work) -> [Run] {
            counts.requested += 1
            if link.invalidated {
                counts.abandoned += 1  // no frame of that link will ever start it
                return []
            }
            var k = keys[key] ?? KeyState()
            k.generation += 1
            if pending[key] != nil { counts.coalesced += 1 } else { counts.outstanding += 1 }
            pending[key] = Request(generation: k.generation, order: nextOrder, target: target, work: work)
            nextOrder += 1
            // A result made for an older request is stale now: never committed.
            if k.ready != nil {
                k.ready = nil
                counts.superseded += 1
                counts.outstanding -= 1
            }
            keys[key] = k
            return k.executing
        }

        /// Drops the pending requests, waiting runs and ready results (superseded); returns the
        /// runs executing, which their generation now cancels.
        mutating func cancelAll() -> [Run] {
            counts.superseded += pending.count
            counts.outstanding -= pending.count
            pending = [:]
            var running: [Run] = []
            for key in Array(keys.keys) {
                keys[key]?.generation += 1
                running += keys[key]?.executing ?? []
            }
            let dropped = dropStarted()
            counts.superseded += dropped
            counts.outstanding -= dropped
            return running
        }

        /// Gives up every run started for the link followed so far (`abandoned`), those still
        /// executing included (the new epoch cancels them, and ``finish(_:_:now:)`` counts them
        /// no more); returns those, to cancel their tasks.
        mutating func abandonRuns() -> [Run] {
            let running = keys.values.flatMap(\.executing).filter { $0.epoch == epoch }
            epoch += 1
            committedThrough = 0  // another link counts its own sequence
            let dropped = dropStarted() + running.count
            counts.abandoned += dropped
            counts.outstanding -= dropped
            return running
        }

        /// Gives up the requests no frame started yet (`abandoned`).
        mutating func abandonPending() -> [Run] {
            counts.abandoned += pending.count
            counts.outstanding -= pending.count
            pending = [:]
            return []
        }

        /// Empties every key's waiting and ready slots; returns how many there were.
        private mutating func dropStarted() -> Int {
            var dropped = 0
            for key in Array(keys.keys) {
                if keys[key]?.waiting != nil { dropped += 1 }
                if keys[key]?.ready != nil { dropped += 1 }
                keys[key]?.waiting = nil
                keys[key]?.ready = nil
            }
            return dropped
        }

        func isCancelled(_ run: Run) -> Bool {
            run.epoch != epoch || link.invalidated || keys[run.key]?.generation != run.generation
                || committedThrough >= run.targetSequence
        }

        /// The commit half of ``FrameWork/advance(_:frame:commit:requesting:)``: the results for
        /// `frame`'s target (on time only), and the runs that missed it.
        mutating func commits(for frame: DisplayLink.Frame, now: UInt64) -> ([Ready], [Run])? {
            guard !link.invalidated, frame.targetSequence > committedThrough else { return nil }
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
        /// request's, in request order. Returns the keys to send a pool job for. The commit
        /// point of a run's target is expected as long before it as this frame came before its
        /// own target.
        mutating func starts(for frame: DisplayLink.Frame, now: UInt64) -> [Key] {
            let lead = frame.targetTimestampNanoseconds > now ? frame.targetTimestampNanoseconds - now : 0
            var starts: [Key] = []
            for (k, request) in pending.sorted(by: { $0.value.order < $1.value.order }) {
                let (sequence, ns) = Self.target(request.target.index, of: frame)
                let run = Run(
                    key: k, request: request, epoch: epoch, targetSequence: sequence, targetNs: ns,
                    commitDeadlineNs: ns > lead ? ns - lead : 0)
                var state = keys[k] ?? KeyState()
                if state.waiting != nil {
                    // Replaced before a thread took it; the new run keeps its place in the
                    // pool's line (the job already there takes it), so no new job is sent.
                    counts.superseded += 1
                    counts.outstanding -= 1
                } else {
                    starts.append(k)
                }
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
            let (stepSequence, stepNs): (UInt64, UInt64) =
                timelines.count >= 2
                ? (timelines[1].sequence - timelines[0].sequence, timelines[1].presentationNs - timelines[0].presentationNs)
                : (max(frame.targetSequence &- frame.sequence, 1), frame.targetTimestampNanoseconds &- frame.timestampNanoseconds)
            let n = UInt64(index)
            return (base.sequence + n * stepSequence, base.presentationNs + n * stepNs)
        }

        /// A pool thread takes the key's waiting run.
        mutating func begin(_ k: Key) -> Run? {
            guard let run = keys[k]?.waiting else { return nil }
            keys[k]?.waiting = nil
            keys[k]?.executing.append(run)
            executing += 1
            peaks.executing = max(peaks.executing, executing)
            peaks.inFlightPerKey = max(peaks.inFlightPerKey, keys[k]?.executing.count ?? 0)  // the waiting one began
            return run
        }

        /// A run ended: its result waits for its frame, unless the link, a newer request or the
        /// clock overtook it.
        mutating func finish(_ run: Run, _ result: Result<Output, any Error>, now: UInt64) {
            keys[run.key]?.executing.removeAll { $0 === run }
            executing -= 1
            // Runs of an earlier epoch were counted when it ended.
            guard run.epoch == epoch else { return }
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

/// The link a ``FrameWork`` follows, held weakly: the link's handler usually holds the work.
struct FollowedLink: Sendable {
    weak var link: DisplayLink?
    let id: ObjectIdentifier?
    /// The link was invalidated: requests are abandoned until another link advances the work.
    var invalidated = false

    init() { id = nil }
    init(_ link: DisplayLink) {
        self.link = link
        id = ObjectIdentifier(link)
    }
}
