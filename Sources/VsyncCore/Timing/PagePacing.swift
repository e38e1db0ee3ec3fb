/// Page pacing (protocol 5): a client that paces itself wakes from its own timer, aimed from
/// the timing page at P(s) − W for each target vblank s, and makes its frame from the page; the
/// daemon sends it no tick (a `pageOnly` subscription) and corrects it through the page (a newer
/// model, a new generation) and the socket (SUBSCRIBED's new divisor, display events).
/// The same targets and frame the daemon's paced tick would carry (FramePacing).
public enum PagePacing {
    /// The next target: the first vblank at the subscription's rate (a multiple of `divisor`)
    /// whose wake, `workDurationNs` before it, is after `nowNs`, and after `previous` (the last
    /// target handed out). Nil when the page has no period.
    public static func aim(
        _ t: VBlankTiming, divisor: UInt32, workDurationNs: UInt64, nowNs: UInt64,
        after previous: UInt64?
    ) -> (sequence: UInt64, wakeNs: UInt64)? {
        guard let first = t.nextVBlank(after: nowNs &+ workDurationNs) else { return nil }
        let d = UInt64(max(divisor, 1))
        var s = (first.sequence &+ d &- 1) / d &* d
        if let previous, s <= previous { s = (previous / d &+ 1) &* d }
        return (s, t.timestamp(ofSequence: s) &- workDurationNs)
    }

    /// Whether the frame for `target` is still worth handing out at `nowNs`: not once the page
    /// says its vblank came, nor, on a fixed grid, once its time has gone by (a wake-up that
    /// late, on a busy machine, would hand out a frame for a vblank already shown). The daemon's
    /// paced ticks pass such a frame over the same way (`FramePacer.fire`) and count it as
    /// skipped. Under variable refresh the display waits for the frame until its vblank comes.
    public static func isDue(_ t: VBlankTiming, target: UInt64, nowNs: UInt64) -> Bool {
        guard target > t.lastSequence else { return false }
        return t.minimumIntervalNs > 0 || t.timestamp(ofSequence: target) > nowNs
    }

    /// The frame for `target` as the daemon's paced tick has it: the newest vblank, the
    /// target and three more vblanks at the rate with the model's times, the generation.
    public static func tick(
        _ t: VBlankTiming, subscriptionID: UInt32, target: UInt64, divisor: UInt32,
        skipped: UInt32
    ) -> Tick {
        let d = UInt64(max(divisor, 1))
        var timelines = FrameTimelines()
        for k in 0..<UInt64(FrameTimelines.capacity) {
            let s = target &+ k &* d
            timelines.append(FrameTimeline(sequence: s, presentationNs: t.timestamp(ofSequence: s)))
        }
        let interval = UInt64(t.periodNs + 0.5)
        var flags: TickFlags = t.flags & DisplayFlags.synthetic.rawValue != 0 ? .synthetic : .hardwareTimestamp
        // Variable refresh: the page's line is the earliest the vblanks can be, as the daemon's ticks say.
        if t.minimumIntervalNs > 0 { flags.insert(.variable) }
        return Tick(
            subscriptionID: subscriptionID, displayID: t.displayID, sequence: t.lastSequence, timestampNs: t.lastTimestampNs,
            targetTimestampNs: timelines[0].presentationNs, displayIntervalNs: interval, clientIntervalNs: interval &* d,
            skipped: skipped, divisor: UInt32(d), flags: flags,
            targetSequence: target, timelines: timelines, generation: t.generation)
    }
}
