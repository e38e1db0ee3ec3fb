#if !VSYNC_EMBEDDED
    import VsyncCore
#endif

/// Where a page-paced subscription's timer is aimed.
struct PagePacer {
    /// The vblank the next wake is for (0: none yet, the page has no period for the display),
    /// and the wake: `workDurationNs` before its predicted time (or the next look at the page).
    var target: UInt64
    var wakeNs: UInt64
    /// The last target handed out, for the skipped count of the next.
    var lastTarget: UInt64?
    /// The display's generation when aimed: another one (mode, on/off, model reset) aims afresh.
    var generation: UInt32
}

// Page-paced frames (protocol 5): a subscription that is page-only and has a work duration is
// woken by this client's own timerfd, in its own epoll set, aimed from the timing page at
// P(s) − W (PagePacing); the daemon sends it no tick. A subscription without the page (an older
// daemon) gets no frames this way: the daemon's paced ticks are for clients that ask for them.
extension VsyncClient {
    /// Hands out the frames whose wake is due and aims the next; returns the frames added.
    func pagePace(now: UInt64) -> Int {
        guard !pagePacers.isEmpty || hasPagePacedSubscription else { return 0 }
        var frames = 0
        for id in subscriptions.keys {
            guard let info = subscriptions[id], isPagePaced(info), let displayID = info.display?.displayID,
                let t = try? timingPage.timing(displayID: displayID), t.isOn
            else {
                // Not paced, no page, or the display is off: the socket brings what changes that.
                pagePacers[id] = nil
                continue
            }
            guard t.periodWholeNs > 0 else {
                // Lit but not measured yet (its vblank events just came on): nothing on the socket
                // will say when it is, so look at the page again shortly.
                pagePacers[id] = PagePacer(target: 0, wakeNs: now &+ Self.pageUnmeasuredRetryNs, lastTarget: nil, generation: t.generation)
                continue
            }
            let w = info.workDurationNs
            guard var pacer = pagePacers[id], pacer.target != 0, pacer.generation == t.generation,
                pacer.target % UInt64(info.divisor) == 0
            else {
                // New, or the display changed: aim afresh (a mode change may bring a new divisor).
                pagePacers[id] = PagePacing.aim(t, divisor: info.divisor, workDurationNs: w, nowNs: now, after: nil)
                    .map { PagePacer(target: $0.sequence, wakeNs: $0.wakeNs, lastTarget: nil, generation: t.generation) }
                continue
            }
            guard now >= pacer.wakeNs else { continue }
            // A fresher model may have moved the target since the aim: wake then, not early.
            let wake = t.timestamp(ofSequence: pacer.target) &- w
            if wake > now &+ Self.pageEarlyToleranceNs {
                pacer.wakeNs = wake
                pagePacers[id] = pacer
                continue
            }
            let d = UInt64(info.divisor)
            guard PagePacing.isDue(t, target: pacer.target, nowNs: now) else {
                // Woken too late for it: passed over, and counted in the next frame's skipped
                // (as if the frame before it had been the last handed out, when none was).
                let last = pacer.lastTarget ?? pacer.target &- d
                pagePacers[id] = PagePacing.aim(t, divisor: info.divisor, workDurationNs: w, nowNs: now, after: pacer.target)
                    .map { PagePacer(target: $0.sequence, wakeNs: $0.wakeNs, lastTarget: last, generation: t.generation) }
                continue
            }
            let skipped = pacer.lastTarget.map { UInt32(clamping: (pacer.target &- $0) / d &- 1) } ?? 0
            events.append(
                .frame(
                    ClientFrame(
                        PagePacing.tick(t, subscriptionID: id, target: pacer.target, divisor: info.divisor, skipped: skipped),
                        replaced: 0, receivedNs: now)))
            frames += 1
            pagePacers[id] = PagePacing.aim(t, divisor: info.divisor, workDurationNs: w, nowNs: now, after: pacer.target)
                .map { PagePacer(target: $0.sequence, wakeNs: $0.wakeNs, lastTarget: pacer.target, generation: t.generation) }
        }
        if pagePacers.count > subscriptions.count { pagePacers.removeAll { subscriptions.index(of: $0) == nil } }
        return frames
    }

    /// Asked on every dispatch: each subscription is looked at in place, not copied out.
    private var hasPagePacedSubscription: Bool {
        for i in 0..<subscriptions.count where isPagePaced(subscriptions[at: i]) { return true }
        return false
    }

    /// The earliest page-paced wake, 0 for none: `updateTimer` arms the timerfd for it.
    var pageWakeNs: UInt64 {
        var earliest: UInt64 = 0
        for (_, pacer) in pagePacers.entries where earliest == 0 || pacer.wakeNs < earliest { earliest = max(pacer.wakeNs, 1) }
        return earliest
    }

    /// Page only, with a work duration, running, on a display: its frames come from the page.
    func isPagePaced(_ info: SubscriptionInfo) -> Bool {
        info.flags.contains(.pageOnly) && info.workDurationNs > 0 && !info.paused && info.active && info.divisor > 0
            && (info.display?.displayID ?? 0) != 0
    }

    /// A wake this much before the target's (re-predicted) wake still hands the frame out: the
    /// timer's own slack, not a reason to sleep again.
    static var pageEarlyToleranceNs: UInt64 { 200_000 }

    /// How often a page-paced subscription looks at a lit display's record until it has a
    /// period (the daemon's first vblanks after turning events on).
    static var pageUnmeasuredRetryNs: UInt64 { 2_000_000 }
}
