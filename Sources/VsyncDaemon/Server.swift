import Glibc
import Logging
import VsyncCore

/// vsyncd's server: one epoll loop, one thread, over the vblank source, the listening socket,
/// the clients, a signalfd, a housekeeping timer and the pacing timer (work durations).
///
/// It owns a few objects, each keeping its own state in its own file: the loop (`EventLoop`),
/// the displays (`DisplaySet`), the clients (`ClientSet`), the pacing timer (`PacingTimer`) and
/// housekeeping (`Housekeeping`). What it does with them is in the Server+ files, by concern.
///
/// Nothing here blocks: client sockets are non-blocking and ticks to a full socket are
/// coalesced (see `Client`). Client input is decoded by the bounds-checked codec; anything
/// malformed disconnects that client only.
final class Server {
    let configuration: DaemonConfiguration
    let logger: Logger
    let source: VBlankSource
    let loop: EventLoop
    let displays = DisplaySet()
    let clients: ClientSet
    /// Who may connect (`Server+Admission`).
    let access: DisplayAccess
    let pacing: PacingTimer
    let housekeeping: Housekeeping
    /// The shared timing page (protocol 5); nil when the kernel could not make one.
    let timingPage: TimingPage?
    var ticks = TickEncoder()

    /// The send buffer each client socket gets. Small on purpose: the socket buffer is itself a
    /// queue of stale ticks, so it should hold only a few frames (it must fit one 4096-byte message).
    static let clientSendBuffer: Int32 = 8192

    init(
        configuration: DaemonConfiguration, source: VBlankSource, listener: ListeningSocket,
        notifier: SystemdNotifier?, signals: consuming FileDescriptor, logger: Logger
    ) throws(DaemonError) {
        self.configuration = configuration
        self.source = source
        self.logger = logger
        clients = ClientSet(listener: listener)
        access = DisplayAccess(configuration: configuration, synthetic: source.isSynthetic, logger: logger)
        loop = try EventLoop(signals: signals)
        do {
            timingPage = try TimingPage()
        } catch {
            logger.warning("\(error): clients get ticks but no page")
            timingPage = nil
        }
        housekeeping = try Housekeeping(notifier: notifier)
        pacing = try PacingTimer()
        try loop.register(listener.fd.raw, .listener)
        try loop.register(housekeeping.timer.fd.raw, .housekeeping)
        try loop.register(pacing.timer.fd.raw, .pacing)
    }

    deinit { ticks.deallocate() }

    // MARK: - Run

    /// Opens the displays, tells systemd it is ready, and serves until SIGTERM/SIGINT.
    func run() throws(DaemonError) {
        rescanDisplays(announce: false)
        logger.info(
            "vsyncd ready on \(clients.listener.description): \(displays.count) display(s), source \(source.isSynthetic ? "timer" : "drm"), \(Self.schedulingText())"
        )
        housekeeping.notifier?.notify("READY=1\n" + statusLine())
        replanIfChanged()
        while loop.running {
            loop.epoll.wait(timeoutMs: -1) { fd, events in
                guard loop.running else { return }
                switch loop.roles[fd] {
                case .listener: acceptClients()
                case .signal: loop.readSignal(logger: logger)
                case .housekeeping:
                    housekeeping.timer.drain()
                    doHousekeeping()
                // No read of the timerfd: `wake` always sets it anew (or disarms it), which clears
                // its count, so the tick goes out one syscall sooner.
                case .pacing: wake()
                case .source: handleSource(fd)
                case .client(let c): handleClient(c, events: events)
                case nil: break  // closed earlier in this batch
                }
            }
            replanIfChanged()
            if housekeeping.isDue(now: monotonicNow()) {
                doHousekeeping()
                replanIfChanged()
            }
        }
        shutdown()
    }

    /// How this process is scheduled, for the ready line: ticks late under load are first a
    /// question of whether vsyncd.service's real-time policy reached the daemon.
    static func schedulingText() -> String {
        var param = sched_param()
        // The unit's CPUSchedulingResetOnFork= comes back as a flag in the policy's high bit.
        let resetOnFork: Int32 = 0x4000_0000
        let policy = sched_getscheduler(0) & ~resetOnFork
        _ = sched_getparam(0, &param)
        switch policy {
        case SCHED_RR: return "scheduled SCHED_RR \(param.sched_priority)"
        case SCHED_FIFO: return "scheduled SCHED_FIFO \(param.sched_priority)"
        default:
            errno = 0
            let nice = getpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0)
            return "scheduled normally (nice \(errno == 0 ? nice : 0))"
        }
    }

    func shutdown() {
        housekeeping.notifier?.notify("STOPPING=1")
        for client in Array(clients) { disconnect(client, reason: "daemon stopping", level: .info) }
        for d in displays where source.isActive(d.key) { try? source.setActive(d.key, false, token: d.token) }
        logger.info("vsyncd stopped")
    }

    // MARK: - Status and housekeeping

    func statusLine() -> String {
        let on = displays.filter { $0.state == .on }.count
        return "STATUS=\(displays.count) display(s) (\(on) on), \(clients.count) client(s)"
    }

    /// The one place the housekeeping timer and the status line are redone: once a loop turn,
    /// if the displays or the clients marked themselves changed in it. The timer runs only
    /// while there is work (active displays, displays off with subscribers, stalled or waiting
    /// clients, a rescan due) or a watchdog to feed: an idle daemon never wakes up.
    func replanIfChanged() {
        guard displays.changed || clients.changed else { return }
        displays.changed = false
        clients.changed = false
        let ticking = displays.contains { source.isActive($0.key) }
        let busy =
            ticking || displays.contains { $0.state == .off && !$0.subscriptions.isEmpty }
            || clients.blockedCount > 0 || clients.contains { !$0.waiting.isEmpty } || source.wantsRescanSoon
            || displays.rescanAgainAtNs != nil
        var interval: UInt64? = busy ? (ticking ? Housekeeping.fallbackIntervalNs : Housekeeping.intervalNs) : nil
        if clients.listenerPausedUntilNs != nil { interval = Housekeeping.listenerPauseIntervalNs }
        housekeeping.plan(interval)
        if housekeeping.notifier != nil { housekeeping.publish(status: statusLine()) }
    }

    func doHousekeeping() {
        let now = monotonicNow()
        housekeeping.started(now: now)
        if clients.listenerPauseEnds(now: now) {
            do { try loop.register(clients.listener.fd.raw, .listener) } catch { logger.error("\(error)") }
        }
        let stallNs = UInt64(configuration.stallTimeout * 1e9)
        for client in clients.stalled(now: now, boundNs: stallNs) {
            disconnect(client, reason: "socket full for over \(configuration.stallTimeout) s (client stopped reading)", level: .warning)
        }
        // Someone waits for a display that a mode set may light at any moment (no event says
        // so): re-read the cards at every housekeeping turn (4 Hz) until it is there.
        // A card coming up (its node there, not yet openable) is retried at the same rate.
        // Followers of `primary` need a display lit by a mode set (no event either) noticed,
        // so the cards are re-read once a second while one runs: the bounded backstop.
        let waiting = source.wantsRescanSoon || clients.contains(where: { !$0.waiting.isEmpty })
        if let again = displays.rescanAgainAtNs, now >= again {
            displays.rescanAgainAtNs = nil
            rescanDisplays(announce: true)
        } else if waiting, now &- displays.lastRescanNs >= Housekeeping.intervalNs {
            rescanDisplays(announce: true)
        } else if now &- displays.lastRescanNs >= Housekeeping.fallbackIntervalNs,
            displays.contains(where: {
                $0.subscriptions.contains { !$0.paused && $0.followsPrimary && $0.client.features.contains(.followingPrimary) }
            })
        {
            rescanDisplays(announce: true)
        }
        for d in displays {
            publishTiming(d)
            let vblankOn = source.isActive(d.key)
            if vblankOn, now &- d.lastRecheckNs >= 1_000_000_000 {
                recheck(d, now: now)
            } else if d.state == .off, !d.subscriptions.isEmpty, now &- d.lastRecheckNs >= 500_000_000 {
                recheck(d, now: now)
            } else if d.state == .on, d.wantsVBlank, !vblankOn, now &- d.lastRecheckNs >= 1_000_000_000 {
                // A transient source error stopped events: try again once a second.
                d.lastRecheckNs = now
                updateVBlank(d)
            }
        }
        // Re-planned once this turn is over: what changed here (a rescan, a disconnect) says so.
        displays.changed = true
    }
}
