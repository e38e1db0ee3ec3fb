import Dispatch
import Foundation

// Where a link fires: run loops, a dispatch queue, the reader thread, `frames` streams.
extension DisplayLink {
    /// Fires the link on `runLoop` while it runs `mode`.
    ///
    /// A link added for `.default` does not fire while the run loop runs another mode (a
    /// tracking mode, say); one added for `.common` fires in every mode the run loop counts as
    /// common. A link may be added for several modes. Adding an invalidated link does nothing.
    public func add(to runLoop: RunLoop, forMode mode: RunLoop.Mode) {
        withState { s in
            guard s.valid else { return }
            if let i = s.contexts.runLoops.firstIndex(where: { $0.runLoop === runLoop }) {
                guard !s.contexts.runLoops[i].modes.contains(mode) else { return }
                s.contexts.runLoops[i].modes.insert(mode)
                runLoop.add(s.contexts.runLoops[i].timer, forMode: mode)
                return
            }
            let timer = makeTimer(for: runLoop)
            s.contexts.runLoops.append(DeliveryContexts.RunLoopTarget(runLoop: runLoop, modes: [mode], timer: timer))
            runLoop.add(timer, forMode: mode)
            contextsChanged(&s)
        }
    }

    /// Stops firing the link on `runLoop` in `mode`. Removed from its last mode, queue and
    /// stream, the link unsubscribes and the library stops keeping it alive.
    public func remove(from runLoop: RunLoop, forMode mode: RunLoop.Mode) {
        let (old, new) = withState { s -> (Timer?, Timer?) in
            guard let i = s.contexts.runLoops.firstIndex(where: { $0.runLoop === runLoop }),
                s.contexts.runLoops[i].modes.contains(mode)
            else { return (nil, nil) }
            let old = s.contexts.runLoops[i].timer
            s.contexts.runLoops[i].modes.remove(mode)
            if s.contexts.runLoops[i].modes.isEmpty {
                s.contexts.runLoops.remove(at: i)
                contextsChanged(&s)
                return (old, nil)
            }
            // Foundation cannot take a timer out of one mode only: replace it.
            let timer = makeTimer(for: runLoop)
            s.contexts.runLoops[i].timer = timer
            for m in s.contexts.runLoops[i].modes { runLoop.add(timer, forMode: m) }
            return (old, s.contexts.runLoops[i].mailbox.repoke() ? timer : nil)
        }
        old?.invalidate()
        new?.fireDate = Date()
    }

    /// Fires the link on `queue`. At most one callback is queued at a time; a tick that arrives
    /// while one is pending replaces it. Calling it again moves the link to the new queue (and
    /// off the reader thread, if it was started with ``start()``).
    ///
    /// When every link of the process on this socket runs on this one queue (the usual case: one
    /// link, or all links on one render queue) and it is not the main queue, the library's reader
    /// thread runs the handler itself inside `queue.sync`: still on `queue`, serialized with its
    /// other work, but with one thread wake-up per frame instead of two. While the queue is busy
    /// the reader waits, and then delivers only the newest tick, so a busy queue skips frames
    /// rather than queueing them. Once the queue has kept the reader waiting over 250 ms (it
    /// runs long work too), the process's links go back to `async` delivery for good, so that
    /// the socket is always read and the daemon never takes the process for a stalled client.
    /// Links on several queues, run loops or streams are posted to with `async` from the start,
    /// so no queue's backlog can hold up another's links.
    public func start(on queue: DispatchQueue) {
        withState { s in
            guard s.valid else { return }
            s.contexts.queue = queue
            s.contexts.direct = false
            s.contexts.directMailbox = Mailbox()
            contextsChanged(&s)
        }
    }

    /// Fires the link directly on the library's reader thread, the thread that receives the
    /// ticks from vsyncd, like `CVDisplayLink`'s callback on its own thread.
    ///
    /// This saves a thread wake-up per frame over ``start(on:)``, and so latency and CPU, but
    /// the handler runs on a thread you do not own:
    /// - Keep it short and never block in it. While it runs, the reader thread reads nothing:
    ///   the other links of the process on the same socket that use this mode wait for it
    ///   (links on queues and run loops have already been handed their frame), and requests
    ///   such as ``isPaused`` changes are sent after it returns.
    /// - A slow handler skips frames rather than queueing them: when it returns, only the
    ///   newest tick is delivered, and ``skippedFrames`` counts the rest.
    /// - ``errorHandler`` and ``displayChangeHandler`` are called on the same thread.
    /// - The handler may use the link (read its properties, pause it, ``invalidate()`` it)
    ///   and make other links; hop to your own queue for anything else.
    ///
    /// Calling ``start(on:)`` moves the link to a queue; ``stop()`` stops it.
    public func start() {
        withState { s in
            guard s.valid else { return }
            s.contexts.queue = nil
            s.contexts.queueMailbox.dropFrame()
            s.contexts.direct = true
            contextsChanged(&s)
        }
    }

    /// Stops firing the link on its dispatch queue or reader thread (``start(on:)``, ``start()``).
    public func stop() {
        withState { s in
            s.contexts.queue = nil
            s.contexts.queueMailbox.dropFrame()
            s.contexts.direct = false
            s.contexts.directMailbox = Mailbox()
            contextsChanged(&s)
        }
    }

    /// The link's frames as an async sequence.
    ///
    /// **Every read of `frames` makes a new, independent stream** (an `AsyncStream` has one
    /// consumer): read it once per consumer and keep the stream, e.g. `for await frame in
    /// link.frames`. Each stream has its own mailbox that keeps only the newest frame, so a
    /// slow consumer skips frames instead of falling behind; ``Frame/skipped`` counts the ones
    /// it skipped, as for callbacks. All streams of a link share its one subscription. Making a
    /// stream subscribes the link, like scheduling it; the link's handler is not called for
    /// stream frames. Ending the iteration removes the stream; ``invalidate()`` ends them all.
    public var frames: AsyncStream<Frame> {
        let id = withState { s -> Int in
            defer { s.contexts.nextStreamID += 1 }
            return s.contexts.nextStreamID
        }
        let stream = FrameStream { [weak self] in self?.removeStream(id) }
        let added = withState { s -> Bool in
            guard s.valid else { return false }
            s.contexts.streams[id] = DeliveryContexts.StreamRef(stream: stream)
            contextsChanged(&s)
            return true
        }
        if !added { stream.finish() }
        return AsyncStream(unfolding: { await stream.next() }, onCancel: { stream.finish() })
    }

    private func removeStream(_ id: Int) {
        withState { s in
            guard s.contexts.streams.removeValue(forKey: id) != nil else { return }
            contextsChanged(&s)
        }
    }

    private func makeTimer(for runLoop: RunLoop) -> Timer {
        // Far-future and repeating: it only fires when a tick sets its fire date to now.
        let key = ObjectIdentifier(runLoop)
        return Timer(fire: .distantFuture, interval: 1e9, repeats: true) { [weak self] _ in
            self?.fire(.runLoop(key))
        }
    }
}
