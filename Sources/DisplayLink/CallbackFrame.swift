import Glibc

/// The frame of the callback running on the calling thread, if any: what ``DisplayLink``'s frame
/// properties read inside a handler. One slot per thread (a pthread key, made once), kept for
/// the thread's life: binding a frame is a store, where a `TaskLocal` allocated an entry in the
/// concurrency runtime on every callback, which after a frame of sleep is cold code.
enum CallbackFrame {
    /// A thread's slot. Only its own thread touches it.
    private final class Slot {
        var frame: DisplayLink.DeliveredFrame?
    }

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        // The slot goes with its thread.
        let made = pthread_key_create(&key) { raw in if let raw { Unmanaged<Slot>.fromOpaque(raw).release() } }
        precondition(made == 0, "pthread_key_create failed (\(made)): the process is out of thread-specific keys")
        return key
    }()

    private static func threadSlot() -> Slot {
        if let existing = pthread_getspecific(key) { return Unmanaged<Slot>.fromOpaque(existing).takeUnretainedValue() }
        let made = Slot()
        pthread_setspecific(key, Unmanaged.passRetained(made).toOpaque())
        return made
    }

    /// The frame bound on this thread now; nil outside a callback.
    static var current: DisplayLink.DeliveredFrame? {
        guard let raw = pthread_getspecific(key) else { return nil }
        return Unmanaged<Slot>.fromOpaque(raw).takeUnretainedValue().frame
    }

    /// Runs `body` with `frame` bound on this thread; a callback nested in another (a link made
    /// and fired inside a handler) gets its own and the outer one's comes back after it.
    static func with(_ frame: DisplayLink.DeliveredFrame, _ body: () -> Void) {
        let slot = threadSlot()
        let outer = slot.frame
        slot.frame = frame
        defer { slot.frame = outer }
        body()
    }
}
