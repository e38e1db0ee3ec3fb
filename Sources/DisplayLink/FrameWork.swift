import Dispatch
import Synchronization

/// Work for a link's coming frames, done off the link's context and committed on it: async
/// drawing in the spirit of YYAsyncLayer (seed 004), timed by the display.
///
/// - **Requests** (``request(_:for:work:)``, closure or `async`) name a key (a layer, a tile, a
///   glyph run) and a target: by default the link's frame after the one that starts them.
///   Requests made between two frames are a transaction: at the link's next frame,
///   ``advance(to:requesting:)`` starts one run per key, the newest request's; the others are
///   counted `coalesced`.
/// - **Runs** go to a ``FrameWorkPool`` of serial queues taken in turn. A key has at most one
///   run waiting for a queue (a newer request replaces it there), so beyond the runs executing
///   (at most the pool's size) no key has more than one in flight.
/// - **Cancellation** (YYAsyncLayer's sentinel): ``FrameWorkRun/isCancelled`` turns true once a
///   newer request for the same key arrives, or once the run's target can no longer be made (its
///   commit point came, or its vblank passed). `async` work also sees its `Task` cancelled.
/// - **Commits**: ``advance(to:requesting:)``, called once per frame on the link's context (its run loop,
///   queue, reader thread or `frames` loop), hands `commit` the results for that frame's target
///   vblank, in request order, before that vblank, at most once per frame. A result that a newer
///   request superseded, or whose target passed, is never committed (`superseded`, `late`).
///
/// Drawing never blocks the committing context: ``advance(to:requesting:)`` only takes a
/// short lock. Call it in the link's callback (or for each frame of a `frames` loop), with the
/// frame's requests in its closure:
///
///     let work = FrameWork<Int, Image>(link: link) { done in layers[done.key].contents = done.output }
///     // in the link's handler, on its context:
///     work.advance(to: link.currentFrame!) {
///         for id in dirtyLayers { work.request(id) { run in try render(id, stoppingWhen: run) } }
///     }
///
/// A result requested at frame n (target T) is committed at the frame whose target is T + 1
/// frame (`.nextFrame`), so the work has one frame of the link's rate; longer work asks for
/// ``Target/framesAhead(_:)`` and must not be requested again meanwhile (a newer request
/// supersedes it).
///
/// With a ``DisplayLink/workDuration`` the link's callback, and so the commit point, comes that
/// long before each target vblank: the time the app needs to present what it committed.
public final class FrameWork<Key: Hashable & Sendable, Output: Sendable>: FrameWorkCounting, Sendable {
    /// Which vblank a request's result is for, counted from the frame that starts it.
    public enum Target: Sendable, Equatable {
        /// The vblank after that frame's target: one frame of the link's rate to do the work.
        case nextFrame
        /// `n` frames after that frame's target (1…3, from its frame timelines): for work that
        /// takes longer than a frame.
        case framesAhead(Int)

        var index: Int {
            switch self {
            case .nextFrame: 1
            case .framesAhead(let n): min(max(n, 1), FrameTimelines.capacity - 1)
            }
        }
    }

    /// One committed result.
    public struct Commit: Sendable {
        public let key: Key
        public let output: Output
        /// The vblank it was made for; the frame committing it has this `targetSequence`.
        public let targetSequence: UInt64
    }

    /// The link whose frames time the work.
    public let link: DisplayLink
    /// The queues the work runs on.
    public let pool: FrameWorkPool
    let commit: @Sendable (Commit) -> Void
    let state = Mutex(State())

    /// Frame work timed by `link`, run on `pool`, its results handed to `commit` on the
    /// context that calls ``advance(to:requesting:)``.
    public init(link: DisplayLink, pool: FrameWorkPool = .shared, commit: @escaping @Sendable (Commit) -> Void) {
        self.link = link
        self.pool = pool
        self.commit = commit
    }

    /// What this frame work did so far.
    public var counts: FrameWorkCounts { state.withLock { $0.counts } }

    /// Requests `work` for `key`, started at the link's next frame. The closure runs on a pool
    /// queue; check `run.isCancelled` before each expensive step and give up (throw or return
    /// anything) once it is true.
    public func request(_ key: Key, for target: Target = .nextFrame,
                        work: @escaping @Sendable (FrameWorkRun) throws -> Output) {
        enqueue(key, target, .sync(work))
    }

    /// Requests `async` work for `key`, started at the link's next frame. Its `Task` is
    /// cancelled when the run is (`Task.isCancelled`, `try Task.checkCancellation()`), and
    /// `run.isCancelled` says so too. A pool queue is held until it returns.
    public func request(_ key: Key, for target: Target = .nextFrame,
                        work: @escaping @Sendable (FrameWorkRun) async throws -> Output) {
        enqueue(key, target, .async(work))
    }

    /// Drops every request and result not yet committed (counted `superseded`), and cancels
    /// the runs under way.
    public func cancelAll() {
        let running = state.withLock { s -> [Run] in
            var running: [Run] = []
            s.counts.superseded += s.pending.count
            s.counts.outstanding -= s.pending.count
            s.pending = [:]
            for key in Array(s.keys.keys) {
                s.keys[key]?.generation += 1
                if s.keys[key]?.ready != nil {
                    s.keys[key]?.ready = nil
                    s.counts.superseded += 1
                    s.counts.outstanding -= 1
                }
                running += s.keys[key]?.executing ?? []
            }
            return running
        }
        for run in running { run.cancelTask() }
    }

    /// The link's frame `frame` has come; call it once per frame on the link's context.
    ///
    /// 1. Commits the results made for `frame`'s target vblank, in request order, unless that
    ///    vblank has already passed; the runs that missed it are given up (`late`).
    /// 2. Runs `requesting`, where the frame's requests belong: they are made after this
    ///    frame's commits, so they supersede nothing about to be committed.
    /// 3. Starts one run per key requested since the last frame (the newest request's),
    ///    targeted from this frame.
    ///
    /// A frame whose target is not newer than the last one's commits nothing: at most one
    /// commit per frame. Nothing here waits for drawing.
    public func advance(to frame: DisplayLink.Frame, requesting body: () -> Void = {}) {
        let commitNow = MonotonicClock.nanoseconds()
        guard let (due, late) = state.withLock({ $0.commits(for: frame, now: commitNow) }) else { return }
        for run in late { run.cancelTask() }
        for ready in due {
            commit(Commit(key: ready.run.key, output: ready.output, targetSequence: ready.run.targetSequence))
        }
        body()
        let startNow = MonotonicClock.nanoseconds()
        let starts = state.withLock { $0.starts(for: frame, now: startNow) }
        for key in starts { pool.nextQueue().async { self.execute(key) } }
    }

    private func enqueue(_ key: Key, _ target: Target, _ work: Work) {
        let running = state.withLock { s -> [Run] in
            s.counts.requested += 1
            var k = s.keys[key] ?? KeyState()
            k.generation += 1
            if s.pending[key] != nil { s.counts.coalesced += 1 } else { s.counts.outstanding += 1 }
            s.pending[key] = Request(generation: k.generation, order: s.nextOrder, target: target, work: work)
            s.nextOrder += 1
            // A result made for an older request is stale now: never committed.
            if k.ready != nil {
                k.ready = nil
                s.counts.superseded += 1
                s.counts.outstanding -= 1
            }
            s.keys[key] = k
            return k.executing
        }
        for run in running { run.cancelTask() }
    }

    /// On a pool queue: runs the key's waiting run, if it still has one.
    private func execute(_ key: Key) {
        guard let run = state.withLock({ $0.begin(key) }) else { return }
        let info = FrameWorkRun(
            targetSequence: run.targetSequence, targetTimestampNanoseconds: run.targetNs,
            deadlineNanoseconds: run.deadlineNs, check: { [weak self] in self?.isCancelled(run) ?? true })
        let result: Result<Output, any Error>
        if info.isCancelled {
            result = .failure(CancellationError())
        } else {
            switch run.work {
            case .sync(let work): result = Result { try work(info) }
            case .async(let work): result = Self.wait(for: work, info, run)
            }
        }
        state.withLock { $0.finish(run, result, now: MonotonicClock.nanoseconds()) }
    }

    /// Runs async work in its own task and holds this pool queue until it ends, so the pool
    /// bounds async work as it bounds closures.
    private static func wait(for work: @escaping AsyncWork, _ info: FrameWorkRun, _ run: Run) -> Result<Output, any Error> {
        let outcome = Outcome<Output>()
        let task = Task.detached {
            do { outcome.set(.success(try await work(info))) } catch { outcome.set(.failure(error)) }
        }
        run.attach(task)
        if info.isCancelled { task.cancel() }
        return outcome.wait()
    }

    func isCancelled(_ run: Run) -> Bool {
        if MonotonicClock.nanoseconds() >= run.targetNs { return true }
        return state.withLock { s in s.keys[run.key]?.generation != run.generation || s.committedThrough >= run.targetSequence }
    }
}
