/// What waits for one delivery context of a link (a run loop, a queue, the reader thread, a
/// stream): at most one frame, plus the errors and display changes in order.
///
/// A newer frame replaces a pending one and adds its skipped count, so every context skips
/// frames the same way rather than queueing them, and `skipped` always says how many.
struct Mailbox {
    enum Event: Sendable {
        case error(DisplayLinkError)
        case change(DisplayLink.DisplayChange)
    }

    private(set) var frame: DisplayLink.Frame?
    private(set) var events: [Event] = []
    /// A wake-up is on its way to the context: a further put needs none.
    private var poked = false

    var isEmpty: Bool { frame == nil && events.isEmpty }

    /// Puts `frame`; true when the caller must wake the context.
    mutating func put(_ frame: DisplayLink.Frame) -> Bool {
        var merged = frame
        if let older = self.frame { merged.skipped += older.skipped + 1 }
        self.frame = merged
        return poke()
    }

    /// Queues an error or display change; true when the caller must wake the context.
    mutating func post(_ event: Event) -> Bool {
        events.append(event)
        return poke()
    }

    /// Puts `frame` and takes everything at once, for the context the caller is running: the
    /// frame, counting a pending one it replaces as skipped, and the events that waited.
    mutating func pass(_ frame: DisplayLink.Frame) -> (frame: DisplayLink.Frame, events: [Event]) {
        var merged = frame
        if let older = self.frame { merged.skipped += older.skipped + 1 }
        self.frame = nil
        poked = false
        guard !events.isEmpty else { return (merged, []) }
        defer { events = [] }
        return (merged, events)
    }

    /// Everything pending, for the context that was woken.
    mutating func take() -> (frame: DisplayLink.Frame?, events: [Event]) {
        poked = false
        defer {
            frame = nil
            events = []
        }
        return (frame, events)
    }

    /// Drops a pending frame (the link was paused); events stay.
    mutating func dropFrame() { frame = nil }

    /// The context's wake-up was replaced (a run loop timer re-made): it must be woken again
    /// if anything is pending.
    mutating func repoke() -> Bool {
        poked = false
        return isEmpty ? false : poke()
    }

    private mutating func poke() -> Bool {
        guard !poked else { return false }
        poked = true
        return true
    }
}
