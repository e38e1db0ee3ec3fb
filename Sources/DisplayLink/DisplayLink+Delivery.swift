import Dispatch
import Foundation
import VsyncClientCore
import VsyncCore

// Delivery: what the reader thread hands a link, how each context is woken, and the handler runs.
extension DisplayLink {
    /// The frame a callback runs for, bound for the callback's duration on its own thread
    /// (``CallbackFrame``), so the frame properties read that context's frame (see ``currentFrame``).
    struct DeliveredFrame: Sendable {
        let link: ObjectIdentifier
        let frame: Frame
    }

    /// A handler the reader thread runs itself, after every link of its read has its frame:
    /// a ``start()``ed link's, or a queue link's while the reader is inside `sync` on that queue.
    struct PendingRun: Sendable {
        let link: DisplayLink
        let context: DeliveryContexts.Context

        func run() { link.fire(context) }
    }

    /// Runs on the context that was woken (its run loop, its queue, or the reader thread):
    /// takes what its mailbox holds and calls the handlers outside the lock.
    func fire(_ context: DeliveryContexts.Context) {
        let work = withState { s -> Taken? in
            guard s.valid, let (frame, events) = s.contexts.take(context) else { return nil }
            if let frame { s.lastFrame = frame }
            return Taken(frame: frame, events: events, handler: s.handler, watch: s.hangWatch?.watch)
        }
        if let work { run(work) }
    }

    /// What a context took from its mailbox, with the handler to call, for outside the lock.
    struct Taken {
        let frame: Frame?
        let events: [Mailbox.Event]
        let handler: (@Sendable (DisplayLink) -> Void)?
        /// The context's heartbeat, when hangs are watched.
        let watch: HangWatch?
    }

    private func run(_ work: Taken) {
        dispatch(work.events)
        guard let frame = work.frame, let handler = work.handler else { return }
        work.watch?.willRun()
        CallbackFrame.with(DeliveredFrame(link: ObjectIdentifier(self), frame: frame)) { handler(self) }
        work.watch?.didRun()
    }

    private func dispatch(_ events: [Mailbox.Event]) {
        guard !events.isEmpty else { return }
        let (onError, onChange) = withState { ($0.errorHandler, $0.displayChangeHandler) }
        for event in events {
            switch event {
            case .error(let error): onError?(error)
            case .change(let change): onChange?(change)
            }
        }
    }

    private func perform(_ w: DeliveryContexts.Wakeups, frame: Frame? = nil) {
        if !w.timers.isEmpty {
            let now = Date()
            for timer in w.timers { timer.fireDate = now }
        }
        if let queue = w.queue { queue.async { self.fire(.queue) } }
        if let frame { for stream in w.streams { stream.put(frame) } }
        if w.global { DispatchQueue.global().async { self.fire(.queue) } }
    }

    /// A frame from the reader thread: the newest for this link in its read. `inlineQueue` is
    /// the queue the reader thread is running on inside `sync`, if any; `pauses` the link's pause
    /// count when the core read the frame. Adds the handler the reader thread must run itself to
    /// `runs`, to be run after every link of the read has its frame.
    func connectionDidDeliver(
        _ frame: Frame, pauses: UInt32, inlineOn inlineQueue: DispatchQueue?,
        into runs: inout [PendingRun]
    ) {
        let delivery = withState { s -> (DeliveryContexts.Wakeups, DeliveryContexts.Context?)? in
            guard s.valid, !isPaused(s, since: pauses) else { return nil }
            return put(frame, &s, inlineOn: inlineQueue)
        }
        guard let (wakeups, here) = delivery else { return }
        perform(wakeups, frame: frame)
        if let here { runs.append(PendingRun(link: self, context: here)) }
    }

    /// The only event of a read. When the reader thread is the link's one context, the frame
    /// passes through its mailbox to the handler, which runs at once (no other link waits for a
    /// frame): one lock on the link. Otherwise as above, with the handlers run after it.
    func connectionDidDeliver(_ frame: Frame, pauses: UInt32, inlineOn inlineQueue: DispatchQueue?) {
        enum Handoff {
            case dropped
            case here(Taken)
            case put(DeliveryContexts.Wakeups, DeliveryContexts.Context?)
        }
        let handoff = withState { s -> Handoff in
            guard s.valid, !isPaused(s, since: pauses) else { return .dropped }
            if let (passed, events) = s.contexts.pass(frame, inlineOn: inlineQueue) {
                s.lastFrame = passed
                return .here(Taken(frame: passed, events: events, handler: s.handler, watch: s.hangWatch?.watch))
            }
            let (wakeups, here) = put(frame, &s, inlineOn: inlineQueue)
            return .put(wakeups, here)
        }
        switch handoff {
        case .dropped:
            return
        case .here(let work):
            run(work)
        case .put(let wakeups, let here):
            perform(wakeups, frame: frame)
            if let here { fire(here) }
        }
    }

    private func put(_ frame: Frame, _ s: inout State, inlineOn inlineQueue: DispatchQueue?)
        -> (DeliveryContexts.Wakeups, DeliveryContexts.Context?)
    {
        let (wakeups, here) = s.contexts.put(frame, inlineOn: inlineQueue)
        // A frame for a run loop or a queue now waits for it (a stream's reader is not watched).
        if let hang = s.hangWatch, here != nil || !wakeups.timers.isEmpty || wakeups.queue != nil || wakeups.global {
            hang.watch.framePut()
        }
        if !wakeups.streams.isEmpty && s.contexts.runLoops.isEmpty && s.contexts.queue == nil && !s.contexts.direct {
            s.lastFrame = frame
        }
        return (wakeups, here)
    }

    func connectionDidSubscribe(_ answer: Subscribed) {
        if answer.isWaiting { post(.change(.waiting)) }
    }

    /// A display event for the link's subscription; the core has already updated what it
    /// knows of the display, which the properties read.
    func connectionDidReceive(_ event: DisplayEvent) {
        switch event.kind {
        case .modeChanged: post(.change(.modeChanged(refreshHz: Double(event.display.refreshMillihertz) / 1000)))
        case .off: post(.change(.off))
        case .on: post(.change(.on))
        case .variableRefreshChanged: post(.change(.variableRefresh(isOn: event.display.flags.contains(.variable))))
        case .added, .removed: return
        }
    }

    func connectionDidFail(_ error: DisplayLinkError) { post(.error(error)) }

    /// Queues an error or display change in the mailbox of the link's first context.
    private func post(_ event: Mailbox.Event) {
        let posted = withState { s -> (wakeups: DeliveryContexts.Wakeups, here: Bool)? in
            guard s.valid else { return nil }
            return s.contexts.post(event)
        }
        guard let posted else { return }
        // `post` is only called on the reader thread: for a started link that is its context.
        if posted.here { dispatch([event]) } else { perform(posted.wakeups) }
    }
}
