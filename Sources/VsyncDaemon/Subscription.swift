import VsyncCore

/// One SUBSCRIBE of one client: held by its client (by id) and by its display (for broadcast).
final class Subscription {
    let id: UInt32
    // Strong on purpose: a broadcast iterates a copy of a display's subscriptions and may
    // disconnect a client midway, so a subscription must keep its client and display alive.
    // The cycles are broken by `Server.detach`, the one way a subscription ends (unsubscribe,
    // disconnect, display removed), which clears both sides.
    let client: Client
    let display: Display
    var range: FrameRateRange
    var divisor: UInt32
    var paused: Bool
    /// Wake this long before each target vblank (0: just after each vblank). See FramePacing.
    var workDurationNs: UInt64 = 0
    /// Keep ticking from the model while the display is off.
    var predictWhileOff = false
    /// No ticks, only the display's vblanks kept coming into the timing page (protocol 5).
    var pageOnly = false
    /// Every tick from a real vblank: keeps the display's vblank events on in sparse sampling
    /// (protocol 6).
    var hardwareTicks = false
    /// The frame the pacing timer will wake the client for next.
    var pacer = FramePacer()
    /// Due ticks not delivered since the last delivered one (replaced while pending, or never
    /// seen because the vblank was missed).
    var skipped: UInt32 = 0
    /// Sequence of the last due tick, to count due ticks that never came.
    var lastDueSequence: UInt64?
    /// How many subscriptions its user already had on the display when it was made: the send
    /// order within a tick (see `Display.insertFairly`).
    var fairRank = 0
    /// What the client asked for: `primary` followers move with the primary display, and named
    /// subscriptions wait while their display is gone (protocol 3).
    var selector: DisplaySelector = .primary

    init(id: UInt32, client: Client, display: Display, range: FrameRateRange, divisor: UInt32, paused: Bool) {
        self.id = id
        self.client = client
        self.display = display
        self.range = range
        self.divisor = divisor
        self.paused = paused
    }

    /// The SUBSCRIBE that would make this subscription again, as it is now (rate, pause, work
    /// duration): kept while it waits for its display, and replayed when it moves.
    var request: Subscribe {
        var flags: SubscribeFlags = paused ? .startPaused : []
        if hardwareTicks { flags.insert(.hardwareTicks) }
        if predictWhileOff { flags.insert(.predictWhileOff) }
        if pageOnly { flags.insert(.pageOnly) }
        return Subscribe(subscriptionID: id, selector: selector, range: range, flags: flags, workDurationNs: workDurationNs)
    }

    /// Forgets coalesced state: after pause, a rate change or a display going off, the next
    /// tick starts a fresh count.
    func resetDelivery() {
        client.pendingTicks.removeAll { $0.sub === self }
        skipped = 0
        lastDueSequence = nil
        pacer.reschedule()
    }

    /// The display changed under the subscription while on, at the same divisor (its mode, VRR
    /// on or off), and the client asked nothing: its count of due ticks goes on. A tick still
    /// waiting for the full socket is dropped, as it would reach the client after the change's
    /// messages, but it was due and not delivered, so the next tick's `skipped` counts it.
    func displayChanged() {
        let waiting = client.pendingTicks.count
        client.pendingTicks.removeAll { $0.sub === self }
        if client.pendingTicks.count < waiting { skipped &+= 1 }
        pacer.reschedule()
    }
}
