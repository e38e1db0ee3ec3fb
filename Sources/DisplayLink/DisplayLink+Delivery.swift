import Dispatch
import Foundation
import VsyncClientCore
import VsyncCore

// Delivery: what the reader thread hands a link, how each context is woken, and the handler runs.
extension DisplayLink {
    /// The frame a callback runs for, bound for the callback's duration on its own thread, so
    /// the frame properties read that context's frame (see ``currentFrame``).
    struct DeliveredFrame: Sendable {
        let link: ObjectIdentifier
        let frame: Frame
    }

    @TaskLocal static var delivering: DeliveredFrame?

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
        let work = withState { s -> (Frame?, [Mailbox.Event], (@Sendable (DisplayLink) -> Void)?)? in
            guard s.valid, let (frame, events) = s.contexts.take(context) else { return nil }
            if let frame { s.lastFrame = frame }
            return (frame, events, s.handler)
        }
        guard let (frame, events, handler) = work else { return }
        dispatch(events)
        guard let frame, let handler else { return }
        Self.$delivering.withValue(DeliveredFrame(link: ObjectIdentifier(self), frame: frame)) { handler(self) }
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
    /// the queue the reader thread is running on inside `sync`, if any. Returns the handlers
    /// the reader thread must run itself.
    func connectionDidDeliver(_ frame: Frame, inlineOn inlineQueue: DispatchQueue?, into runs: inout [PendingRun]) {
        let delivery = withState { s -> (DeliveryContexts.Wakeups, [DeliveryContexts.Context])? in
            guard s.valid, !isPaused(s) else { return nil }
            let (wakeups, here) = s.contexts.put(frame, inlineOn: inlineQueue)
            if !wakeups.streams.isEmpty && s.contexts.runLoops.isEmpty && s.contexts.queue == nil && !s.contexts.direct {
                s.lastFrame = frame
            }
            return (wakeups, here)
        }
        guard let (wakeups, here) = delivery else { return }
        perform(wakeups, frame: frame)
        for context in here { runs.append(PendingRun(link: self, context: context)) }
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
