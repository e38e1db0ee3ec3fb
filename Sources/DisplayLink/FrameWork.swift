import Synchronization

/// Work for a link's coming frames, done off the link's context and committed on it: async
/// drawing in the manner of YYAsyncLayer, timed by the display.
///
/// - **Requests** (``request(_:for:work:)``, or ``requestTask(_:for:work:)`` for `async` work)
///   name a key (a layer, a tile, a glyph run) and a target: by default the link's frame after
///   the one that starts them. Requests made between two frames are a transaction: at the
///   link's next frame ``advance(_:frame:commit:requesting:)`` starts one run per key, the
///   newest request's; the others are counted `coalesced`.
/// - **Runs** go to a ``FrameWorkPool``: a few threads (one fewer than the cores, leaving one
///   for the link), taking runs in the order their frames started them. A key has at most one run waiting for a thread (a
///   newer one takes its place), so beyond the runs executing no key has more than one in flight.
/// - **Cancellation** (YYAsyncLayer's sentinel): ``FrameWorkRun/isCancelled`` turns true once a
///   newer request for the same key arrives, once the run's target can no longer be made (its
///   commit point came, or its vblank passed), or once the link is invalidated. Work requested
///   with ``requestTask(_:for:work:)`` also sees its `Task` cancelled.
/// - **Commits**: ``advance(_:frame:commit:requesting:)``, called once per frame on the link's
///   context (in its handler, or for each frame of a `frames` loop), hands its `commit`
///   closure the results for that frame's target vblank, in request order, before that vblank,
///   at most once per frame. `commit` runs there and then, on that context, so it may touch the
///   state the app keeps there (`@MainActor` state, for a link on the main run loop or queue).
///   A result that a newer request superseded, or whose target passed, is never committed.
///
/// Drawing never blocks the committing context: ``advance(_:frame:commit:requesting:)`` only
/// takes a short lock. The frame work needs no link to be made, so the link's handler can
/// use it:
///
///     @MainActor final class Board {
///         var tiles: [Tile] = …
///         let work = FrameWork<Int, Image>()
///         var link: DisplayLink?
///         init() {
///             link = DisplayLink(target: self) { board, link in board.step(link) }
///             link?.add(to: .main, forMode: .common)
///         }
///         func step(_ link: DisplayLink) {
///             work.advance(link) { done in tiles[done.key].contents = done.output } requesting: {
///                 for id in dirtyTiles { work.request(id) { run in try render(id, stoppingWhen: run) } }
///             }
///         }
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
    public struct Target: Sendable, Equatable {
        /// How many vblanks at the link's rate after the starting frame's target.
        let index: Int

        /// The vblank after that frame's target: one frame of the link's rate to do the work.
        public static var nextFrame: Target { Target(index: 1) }

        /// `n` frames after that frame's target, for work that takes longer than a frame.
        /// `n` must be 1…3: a frame's ``DisplayLink/Frame/frameTimelines`` predict its target
        /// and three vblanks after it, and a target further out would be a guess; anything
        /// else stops the program, as an out-of-range index does.
        public static func framesAhead(_ n: Int) -> Target {
            precondition(
                (1...FrameTimelines.capacity - 1).contains(n),
                "FrameWork: framesAhead(\(n)) is outside 1…\(FrameTimelines.capacity - 1), the vblanks a frame's timelines predict")
            return Target(index: n)
        }
    }

    /// One committed result.
    public struct Commit: Sendable {
        public let key: Key
        public let output: Output
        /// The vblank it was made for; the frame committing it has this `targetSequence`.
        public let targetSequence: UInt64
    }

    /// The threads the work runs on.
    public let pool: FrameWorkPool
    let state = Mutex(State())

    /// Frame work run on `pool`. It follows the link of its first
    /// ``advance(_:frame:commit:requesting:)``.
    public init(pool: FrameWorkPool = .shared) {
        self.pool = pool
    }

    /// The link whose frames advance this work (the one of the latest
    /// ``advance(_:frame:commit:requesting:)``); nil before the first, or once that link is gone.
    public var link: DisplayLink? { state.withLock { $0.link.link } }

    /// What this frame work did so far.
    public var counts: FrameWorkCounts { state.withLock { $0.counts } }

    /// Requests `work` for `key`, started at the link's next frame. The closure runs on a pool
    /// thread; check `run.isCancelled` before each expensive step and give up (throw or return
    /// anything) once it is true. Once the link is invalidated, a request is counted
    /// `abandoned` at once and never runs.
    public func request(
        _ key: Key, for target: Target = .nextFrame,
        work: @escaping @Sendable (FrameWorkRun) throws -> Output
    ) {
        enqueue(key, target, .sync(work))
    }

    /// Requests `async` work for `key`, run in a `Task` of its own, started at the link's next
    /// frame. The task is cancelled when the run is (`Task.isCancelled`,
    /// `try Task.checkCancellation()`), and `run.isCancelled` says so too. Its code runs on the
    /// pool thread that took the run, which is held until the task ends.
    ///
    /// A separate name from ``request(_:for:work:)``: a closure with no `await` would
    /// otherwise pick the synchronous form and run in no task, where `Task.isCancelled` is
    /// never true.
    public func requestTask(
        _ key: Key, for target: Target = .nextFrame,
        work: @escaping @Sendable (FrameWorkRun) async throws -> Output
    ) {
        enqueue(key, target, .async(work))
    }

    /// Drops every request and result not yet committed (counted `superseded`), and cancels
    /// the runs under way.
    public func cancelAll() {
        let running = state.withLock { $0.cancelAll() }
        for run in running { run.cancelTask() }
    }

    /// A frame of `link` has come; call it once per frame on the link's context, in its handler
    /// (`frame` defaults to the handler's frame, ``DisplayLink/currentFrame``) or for each frame
    /// of a `frames` loop (pass the loop's frame).
    ///
    /// 1. Calls `commit` with the results made for the frame's target vblank, in request
    ///    order, unless that vblank has already passed; the runs that missed it are given up
    ///    (`late`). `commit` runs here, on the calling context, before this returns.
    /// 2. Runs `requesting`, where the frame's requests belong: they are made after this
    ///    frame's commits, so they supersede nothing about to be committed.
    /// 3. Starts one run per key requested since the last frame (the newest request's),
    ///    targeted from this frame.
    ///
    /// A frame whose target is not newer than the last one's commits nothing: at most one
    /// commit per frame. Nothing here waits for drawing. Advancing with another link than
    /// the last gives up the runs started for that one (`abandoned`).
    public func advance(
        _ link: DisplayLink, frame: DisplayLink.Frame? = nil,
        commit: (Commit) -> Void, requesting body: () -> Void = {}
    ) {
        guard let frame = frame ?? link.currentFrame else { return }
        follow(link)
        let commitNow = MonotonicClock.nanoseconds()
        guard let (due, late) = state.withLock({ $0.commits(for: frame, now: commitNow) }) else { return }
        for run in late { run.cancelTask() }
        for ready in due {
            commit(Commit(key: ready.run.key, output: ready.output, targetSequence: ready.run.targetSequence))
        }
        body()
        let startNow = MonotonicClock.nanoseconds()
        let starts = state.withLock { $0.starts(for: frame, now: startNow) }
        for key in starts { pool.submit { self.execute(key) } }
    }

    /// Makes `link` the one this work follows, hearing of its invalidation.
    private func follow(_ link: DisplayLink) {
        let id = ObjectIdentifier(link)
        let (isNew, abandoned) = state.withLock { s -> (Bool, [Run]) in
            guard s.link.id != id else { return (false, []) }
            let running = s.abandonRuns()
            s.link = FollowedLink(link)
            return (true, running)
        }
        for run in abandoned { run.cancelTask() }
        if isNew { link.whenInvalidated { [weak self] in self?.linkInvalidated(id) } }
    }

    private func linkInvalidated(_ id: ObjectIdentifier) {
        let running = state.withLock { s -> [Run] in
            guard s.link.id == id, !s.link.invalidated else { return [] }
            s.link.invalidated = true
            return s.abandonRuns() + s.abandonPending()
        }
        for run in running { run.cancelTask() }
    }

    private func enqueue(_ key: Key, _ target: Target, _ work: Work) {
        let running = state.withLock { $0.enqueue(key, target, work) }
        for run in running { run.cancelTask() }
    }

    func isCancelled(_ run: Run) -> Bool {
        if MonotonicClock.nanoseconds() >= run.targetNs { return true }
        return state.withLock { $0.isCancelled(run) }
    }
}
