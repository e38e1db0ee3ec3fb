import Synchronization

/// The mailbox behind one ``DisplayLink/frames`` stream: the reader thread puts frames, the
/// consumer's `next()` takes the newest, with the skipped ones counted in it.
///
/// The link holds it weakly; the stream's iterator holds it. When the consumer ends the
/// iteration (or drops the stream) it is released, and `onGone` removes it from the link.
final class FrameStream: Sendable {
    private struct State {
        var mailbox = Mailbox()
        var waiter: CheckedContinuation<DisplayLink.Frame?, Never>?
        var finished = false
    }

    private let state = Mutex(State())
    private let onGone: @Sendable () -> Void

    init(onGone: @escaping @Sendable () -> Void) { self.onGone = onGone }

    deinit { onGone() }

    /// A frame for the consumer: handed over at once if it waits, else kept as the newest.
    func put(_ frame: DisplayLink.Frame) {
        let waiter = state.withLock { s -> CheckedContinuation<DisplayLink.Frame?, Never>? in
            guard !s.finished else { return nil }
            if let waiter = s.waiter {
                s.waiter = nil
                return waiter
            }
            _ = s.mailbox.put(frame)
            return nil
        }
        waiter?.resume(returning: frame)
    }

    /// Ends the stream: the consumer's next `next()` returns nil.
    func finish() {
        let waiter = state.withLock { s -> CheckedContinuation<DisplayLink.Frame?, Never>? in
            s.finished = true
            defer { s.waiter = nil }
            return s.waiter
        }
        waiter?.resume(returning: nil)
    }

    func next() async -> DisplayLink.Frame? {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<DisplayLink.Frame?, Never>) in
                let ready = state.withLock { s -> DisplayLink.Frame?? in
                    if let frame = s.mailbox.take().frame { return .some(frame) }
                    if s.finished { return .some(nil) }
                    s.waiter = c
                    return nil
                }
                if let ready { c.resume(returning: ready) }
            }
        } onCancel: {
            finish()
        }
    }
}
