import VsyncClientCore
import VsyncCore

// The link's settings and its subscription, with one owner at a time: the link keeps the
// settings while it has no subscription; once it subscribes they move into the client core's
// `SubscriptionInfo` (the copy the core renews on every reconnect), and every read and write
// goes there until the link unsubscribes and takes them back. No second copy to keep in step.
extension DisplayLink {
    /// What the app set on the link.
    struct Settings: Sendable, Equatable {
        var range = FrameRateRange.default
        var paused = false
        var workDurationNs: UInt64 = 0
        var predictsWhileOff = false
        var pageOnly = false
        var hardwareTicks = false

        init() {}

        init(_ info: SubscriptionInfo) {
            range = info.range
            paused = info.paused
            workDurationNs = info.workDurationNs
            predictsWhileOff = info.flags.contains(.predictWhileOff)
            pageOnly = info.flags.contains(.pageOnly)
            hardwareTicks = info.flags.contains(.hardwareTicks)
        }

        var flags: SubscribeFlags {
            var f: SubscribeFlags = []
            if predictsWhileOff { f.insert(.predictWhileOff) }
            if pageOnly { f.insert(.pageOnly) }
            if hardwareTicks { f.insert(.hardwareTicks) }
            return f
        }
    }

    /// What the daemon said about the link's display, kept when the link unsubscribes so the
    /// properties still answer after ``invalidate()``.
    struct DisplayFacts: Sendable, Equatable {
        var refreshMillihertz: UInt64 = 0
        var displayIntervalNs: UInt64 = 0
        var synthetic = false
        /// Protocol 5: variable refresh on, and the range as intervals (0 when not capable).
        var variable = false
        var minIntervalNs: UInt64 = 0
        var maxIntervalNs: UInt64 = 0

        init() {}

        init(_ info: SubscriptionInfo) {
            refreshMillihertz = info.display?.refreshMillihertz ?? 0
            displayIntervalNs = info.displayIntervalNs
            synthetic = info.display?.flags.contains(.synthetic) ?? false
            variable = info.display?.flags.contains(.variable) ?? false
            minIntervalNs = info.display?.minIntervalNs ?? 0
            maxIntervalNs = info.display?.maxIntervalNs ?? 0
        }
    }

    enum Subscription {
        /// Not subscribed: the link owns its settings.
        case none(Settings, DisplayFacts = DisplayFacts())
        /// Subscribed: the client core owns them, under this id.
        case subscribed(UInt32)
    }

    /// The settings, from whichever owner holds them now (called with the link's lock held).
    func settings(_ s: State) -> Settings {
        switch s.subscription {
        case .none(let settings, _): settings
        case .subscribed(let id): connection.subscription(id).map(Settings.init) ?? Settings()
        }
    }

    /// Whether a frame the core read when the link's pause count was `pauses` must be dropped:
    /// checked for every frame, since a frame read before a pause may reach the link after it.
    /// The core hands out no frame of a paused subscription, so a subscribed link was running
    /// when the frame was read, and was paused since exactly when its count moved; no need to
    /// ask the core (its lock) on every frame.
    func isPaused(_ s: State, since pauses: UInt32) -> Bool {
        switch s.subscription {
        case .none(let settings, _): settings.paused
        case .subscribed: self.pauses.load(ordering: .relaxed) != pauses
        }
    }

    func displayFacts(_ s: State) -> DisplayFacts {
        switch s.subscription {
        case .none(_, let facts): facts
        case .subscribed(let id): connection.subscription(id).map(DisplayFacts.init) ?? DisplayFacts()
        }
    }

    /// Changes the settings where they are kept; a subscribed link's change goes to the daemon.
    /// Returns the settings before and after.
    @discardableResult
    func updateSettings(_ body: (inout Settings) -> Void) -> (old: Settings, new: Settings) {
        withState { s in
            switch s.subscription {
            case .none(var settings, let facts):
                let old = settings
                body(&settings)
                s.subscription = .none(settings, facts)
                if settings.paused && !old.paused { dropFrames(&s) }
                return (old, settings)
            case .subscribed(let id):
                let old = settings(s)
                var new = old
                body(&new)
                connection.apply(id, from: old, to: new)
                if new.paused && !old.paused {
                    // Counted after the core has it: a reader that ran the core before saw the
                    // old count, and sees this one once it takes the link's lock after this.
                    pauses.wrappingAdd(1, ordering: .relaxed)
                    dropFrames(&s)
                }
                return (old, new)
            }
        }
    }

    /// After any change of the link's contexts (called with the link's lock held): subscribes a
    /// link that has one, unsubscribes one that has none, and tells the connection what its
    /// contexts are now.
    func contextsChanged(_ s: inout State) {
        guard s.valid, !s.contexts.isEmpty else { return endSubscription(&s) }
        switch s.subscription {
        case .none(let settings, _):
            if let id = connection.register(self, selector: display, settings: settings, onlyQueue: s.contexts.onlyQueue) {
                s.subscription = .subscribed(id)
            }
        case .subscribed(let id):
            connection.setOnlyQueue(id, s.contexts.onlyQueue)
        }
    }

    /// Unsubscribes, taking the settings back from the core.
    func endSubscription(_ s: inout State) {
        guard case .subscribed(let id) = s.subscription else { return }
        let info = connection.unregister(id)
        s.subscription = .none(info.map(Settings.init) ?? Settings(), info.map(DisplayFacts.init) ?? DisplayFacts())
    }
}
