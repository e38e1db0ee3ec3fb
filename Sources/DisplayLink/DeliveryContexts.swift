import Dispatch
import Foundation

/// The contexts one link is delivered on, each with its ``Mailbox``: run loops, one dispatch
/// queue, the reader thread (``DisplayLink/start()``) and `frames` streams. Part of the link's
/// state, so only touched under the link's lock.
struct DeliveryContexts {
    /// One run loop the link is scheduled on: one timer in every mode it was added for. The
    /// timer's fire date is set to "now" when a tick arrives, which wakes the run loop only when
    /// it runs one of those modes, and fires at most once however many ticks came meanwhile.
    ///
    /// `@unchecked Sendable` (so the link's state can live in a `Mutex`): the run loop and timer
    /// are only added to and removed from under the link's lock, and a timer's fire date may be
    /// set from any thread.
    struct RunLoopTarget: @unchecked Sendable {
        let runLoop: RunLoop
        var modes: Set<RunLoop.Mode>
        var timer: Timer
        var mailbox = Mailbox()
    }

    /// A stream's mailbox, held weakly: the stream's iterator owns it.
    struct StreamRef {
        weak var stream: FrameStream?
    }

    /// Which context a wake-up or a handler run is for.
    enum Context: Sendable, Equatable {
        case runLoop(ObjectIdentifier)
        case queue
        case readerThread
    }

    /// The wake-ups a mailbox put asks for, made after the lock is released.
    struct Wakeups {
        var timers: [Timer] = []
        var queue: DispatchQueue?
        var streams: [FrameStream] = []
        /// An event for a link with no queue and no run loop: run on a global queue.
        var global = false
    }

    var runLoops: [RunLoopTarget] = []
    var queue: DispatchQueue?
    var queueMailbox = Mailbox()
    /// Started with ``DisplayLink/start()``: the handler runs on the connection's reader thread.
    var direct = false
    var directMailbox = Mailbox()
    var streams: [Int: StreamRef] = [:]
    var nextStreamID = 0

    var isEmpty: Bool { runLoops.isEmpty && queue == nil && !direct && streams.isEmpty }

    /// The queue, when it is the link's one context: the fact the connection's ``InlineDelivery``
    /// decides from (this type does not decide whether it may run inline).
    var onlyQueue: DispatchQueue? {
        guard let queue, runLoops.isEmpty, streams.isEmpty, !direct else { return nil }
        return queue
    }

    /// Empties every context; returns the timers to invalidate and the streams to end.
    mutating func removeAll() -> ([Timer], [FrameStream]) {
        let removed = (runLoops.map(\.timer), streams.values.compactMap(\.stream))
        self = DeliveryContexts()
        return removed
    }

    /// The link was paused: pending frames go, events stay.
    mutating func dropFrames() {
        queueMailbox.dropFrame()
        directMailbox.dropFrame()
        for i in runLoops.indices { runLoops[i].mailbox.dropFrame() }
    }

    /// Everything pending for `context`, for the context that was woken; nil if it is gone.
    mutating func take(_ context: Context) -> (frame: DisplayLink.Frame?, events: [Mailbox.Event])? {
        switch context {
        case .runLoop(let key):
            guard let i = runLoops.firstIndex(where: { ObjectIdentifier($0.runLoop) == key }) else { return nil }
            return runLoops[i].mailbox.take()
        case .queue:
            return queueMailbox.take()
        case .readerThread:
            guard direct else { return nil }
            return directMailbox.take()
        }
    }

    /// Puts `frame` in every context's mailbox. `inlineQueue` is the queue the reader thread is
    /// running on inside `sync`, if any. Returns the wake-ups to make and the context whose
    /// handler the reader thread runs itself, if any: the reader thread (``DisplayLink/start()``)
    /// or the inline queue, never both, since a link has either a queue or the reader thread.
    mutating func put(_ frame: DisplayLink.Frame, inlineOn inlineQueue: DispatchQueue?) -> (Wakeups, Context?) {
        var w = Wakeups()
        var here: Context?
        if direct {
            _ = directMailbox.put(frame)
            here = .readerThread
        }
        for i in runLoops.indices where runLoops[i].mailbox.put(frame) {
            w.timers.append(runLoops[i].timer)
        }
        if let queue {
            let poke = queueMailbox.put(frame)
            if queue === inlineQueue { here = .queue } else if poke { w.queue = queue }
        }
        if !streams.isEmpty { w.streams = streams.values.compactMap(\.stream) }
        return (w, here)
    }

    /// A read's only frame, when the reader thread is the link's one context (``DisplayLink/start()``,
    /// or its one queue while the reader runs inline on it): the frame passes straight through
    /// that context's mailbox (``Mailbox/pass(_:)``) to the handler. Nil when the link has any
    /// other context: `put` serves them all then.
    mutating func pass(_ frame: DisplayLink.Frame, inlineOn inlineQueue: DispatchQueue?)
        -> (frame: DisplayLink.Frame, events: [Mailbox.Event])?
    {
        guard runLoops.isEmpty, streams.isEmpty else { return nil }
        if direct && queue == nil { return directMailbox.pass(frame) }
        if !direct, let queue, queue === inlineQueue { return queueMailbox.pass(frame) }
        return nil
    }

    /// Queues an error or display change in the mailbox of the link's first context. True in
    /// `here` when that context is the reader thread (the caller is on it).
    mutating func post(_ event: Mailbox.Event) -> (wakeups: Wakeups, here: Bool) {
        var w = Wakeups()
        if direct && runLoops.isEmpty { return (w, true) }
        if !runLoops.isEmpty {
            if runLoops[0].mailbox.post(event) { w.timers = [runLoops[0].timer] }
        } else if queueMailbox.post(event) {
            if let queue { w.queue = queue } else { w.global = true }
        }
        return (w, false)
    }
}
