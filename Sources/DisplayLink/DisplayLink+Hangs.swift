// Hang detection of the link's context: opt-in, off the frame path unless asked for.
extension DisplayLink {
    /// Watches the context the link runs its handler on (its run loop's thread, its queue, or
    /// the reader thread after ``start()``) with `detector`: a handler that has not returned,
    /// or a frame the context has not begun, for longer than the detector's threshold (by
    /// default 250 ms, looked at every 50 ms) is reported while it lasts, with the stuck
    /// thread's stack taken at that moment, then its length once it moves again (see
    /// ``HangDetector``).
    ///
    /// Call it after scheduling the link: a run loop or ``start()`` runs on one thread, whose
    /// stack also explains a frame waiting for it; a queue's waiting frame has no thread to
    /// blame. Watching ends with ``stopDetectingHangs()`` or ``invalidate()``.
    public func detectHangs(with detector: HangDetector, name: String = "DisplayLink") {
        let (singleThread, observer) = withState { s in (!s.contexts.runLoops.isEmpty || s.contexts.direct, s.hangObserver) }
        let watch = detector.watch(name, singleThread: singleThread, observer: observer)
        let old = withState { s -> (watch: HangWatch, detector: HangDetector)? in
            guard s.valid else { return (watch, detector) }  // nothing left to watch
            defer { s.hangWatch = (watch, detector) }
            return s.hangWatch
        }
        if let old { old.detector.unwatch(old.watch) }
        whenInvalidated { [weak self] in self?.stopDetectingHangs() }
    }

    /// Sends the link's hangs to `observer` too, from the next ``detectHangs(with:name:)`` on
    /// (its ``FrameMonitor`` sets it as it makes the link).
    func observeHangs(_ observer: @escaping @Sendable (HangDetector.Event) -> Void) {
        withState { $0.hangObserver = observer }
    }

    /// Stops watching the link's context for hangs.
    public func stopDetectingHangs() {
        let old = withState { s -> (watch: HangWatch, detector: HangDetector)? in
            defer { s.hangWatch = nil }
            return s.hangWatch
        }
        if let old { old.detector.unwatch(old.watch) }
    }

    /// Drops the frames waiting in the link's mailboxes (with the link's lock held): the
    /// context owes none now.
    func dropFrames(_ s: inout State) {
        s.contexts.dropFrames()
        s.hangWatch?.watch.framesDropped()
    }
}
