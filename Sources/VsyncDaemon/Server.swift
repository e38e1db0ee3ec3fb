import Glibc
import Logging
import VsyncCore

/// vsyncd's server: one epoll loop, one thread, over the vblank source, the listening socket,
/// the clients, a signalfd, a housekeeping timer and the pacing timer (work durations).
///
/// Nothing here blocks: client sockets are non-blocking and ticks to a full socket are
/// coalesced (see `Client`). Client input is decoded by the bounds-checked codec; anything
/// malformed disconnects that client only.
final class Server {
    enum Role { case listener, signal, housekeeping, pacing, source, client }

    let configuration: DaemonConfiguration
    let logger: Logger
    let source: VBlankSource
    let listener: ListeningSocket
    let notifier: SystemdNotifier?
    let epoll: Epoll
    /// The signalfd (SIGTERM, SIGINT).
    let signals: FileDescriptor
    let housekeeping: TimerFD
    var housekeepingInterval: UInt64?
    /// One absolute timer for every subscription's pacing wake: armed at the earliest.
    let pacing: TimerFD
    var pacingArmedNs: UInt64?
    var lastHousekeepingNs: UInt64 = 0
    var lastWatchdogNs: UInt64 = 0

    var roles = DescriptorTable<Role>()
    var sourceFDs: Set<Int32> = []
    var clients: [Int32: Client] = [:]
    /// Clients with `blockedSinceNs` set, so housekeeping need not scan the clients for them.
    var blockedClients = 0
    /// In the order found (the first on is primary), and by slot (see `DisplaySlots`): a
    /// source event's token finds its display with one indexed load.
    var displays: [Display] = [] {
        didSet { displaySlots.update(displays) }
    }
    private(set) var displaySlots = DisplaySlots()
    /// Storage reused by `handleSource` for each read's events.
    var sourceEvents: [SourceEvent] = []
    /// CLOCK_BOOTTIME against CLOCK_MONOTONIC, read once per source read (`checkSuspend`).
    var suspendDetector = SuspendDetector()
    /// Reads CLOCK_MONOTONIC and CLOCK_BOOTTIME for `suspendDetector`; a test gives its own.
    var suspendClocks: @Sendable () -> (monotonicNs: UInt64, boottimeNs: UInt64) = Server.readSuspendClocks
    var nextDisplayID: UInt32 = 1
    var running = true
    var lastStatus = ""
    /// Clients or displays changed since STATUS= was last sent (checked once per loop turn).
    var statusDirty = true
    var lastRescanNs: UInt64 = 0
    /// The primary display last seen, so that a change moves those who follow it.
    var lastPrimaryID: UInt32?
    /// The rescan that follows a hotplug's (see `hotplugged`).
    var rescanAgainAtNs: UInt64?
    /// Held open so that a refusal can still be accepted and sent when out of descriptors.
    var spare: FileDescriptor? = FileDescriptor(opening: "/dev/null", O_RDONLY)
    var acceptFailures = 0
    var lastAcceptLogNs: UInt64 = 0
    var refusalsSinceLog = 0
    var lastRefusalLogNs: UInt64 = 0
    var listenerPausedUntilNs: UInt64?
    /// The shared timing page (protocol 5); nil when the kernel could not make one.
    let timingPage: TimingPage?

    /// Reused buffers: received datagrams and encoded ticks (the hot path allocates nothing).
    let receiveBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: WireProtocol.maxMessageSize + 1, alignment: 8)
    let tickBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Tick.wireSize, alignment: 8)
    /// What `tickBuffer` holds: the tick of stamp `stamp` (one per divisor group of one vblank's
    /// ticks, 0 for any other tick) encoded for `version`, `size` bytes (`Server.sendTick`).
    var encodedTick: (stamp: UInt64, version: UInt16, size: Int) = (0, 0, 0)
    var lastTickStamp: UInt64 = 0

    /// The send buffer each client socket gets. Small on purpose: the socket buffer is itself a
    /// queue of stale ticks, so it should hold only a few frames (it must fit one 4096-byte message).
    static let clientSendBuffer: Int32 = 8192

    init(configuration: DaemonConfiguration, source: VBlankSource, listener: ListeningSocket,
         notifier: SystemdNotifier?, signals: consuming FileDescriptor, logger: Logger) throws(DaemonError) {
        self.configuration = configuration
        self.source = source
        self.listener = listener
        self.notifier = notifier
        self.signals = signals
        self.logger = logger
        epoll = try Epoll()
        do {
            timingPage = try TimingPage()
        } catch {
            logger.warning("\(error): clients get ticks but no page")
            timingPage = nil
        }
        housekeeping = try TimerFD()
        pacing = try TimerFD()
        try register(listener.fd.raw, .listener)
        try register(self.signals.raw, .signal)
        try register(housekeeping.fd.raw, .housekeeping)
        try register(pacing.fd.raw, .pacing)
    }

    deinit {
        receiveBuffer.deallocate()
        tickBuffer.deallocate()
    }

    func register(_ fd: Int32, _ role: Role, events: UInt32 = Epoll.readable) throws(DaemonError) {
        try epoll.add(fd, events: events)
        roles[fd] = role
    }

    func unregister(_ fd: Int32) {
        epoll.remove(fd)
        roles[fd] = nil
    }

    // MARK: - Run

    /// Opens the displays, tells systemd it is ready, and serves until SIGTERM/SIGINT.
    func run() throws(DaemonError) {
        rescanDisplays(announce: false)
        logger.info("vsyncd ready on \(listener.description): \(displays.count) display(s), source \(source.isSynthetic ? "timer" : "drm"), \(Self.schedulingText())")
        notifier?.notify("READY=1\n" + statusLine())
        updateHousekeeping()
        while running {
            epoll.wait(timeoutMs: -1) { fd, events in
                guard running else { return }
                switch roles[fd] {
                case .listener: acceptClients()
                case .signal: readSignal()
                case .housekeeping: housekeeping.drain(); doHousekeeping()
                // No read of the timerfd: `wake` always sets it anew (or disarms it), which clears
                // its count, so the tick goes out one syscall sooner.
                case .pacing: wake()
                case .source: handleSource(fd)
                case .client: if let c = clients[fd] { handleClient(c, events: events) }
                case nil: break  // closed earlier in this batch
                }
            }
            housekeepIfDue()
            publishStatus()
        }
        shutdown()
    }

    /// How this process is scheduled, for the ready line: ticks late under load are first a
    /// question of whether vsyncd.service's real-time policy reached the daemon.
    static func schedulingText() -> String {
        var param = sched_param()
        let policy = sched_getscheduler(0)
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

    func readSignal() {
        var info = [UInt8](repeating: 0, count: 128)  // struct signalfd_siginfo
        guard let n = try? nonBlocking("read", { info.withUnsafeMutableBytes { read(signals.raw, $0.baseAddress, 128) } }),
              n >= 4 else { return }
        let signo = info.withUnsafeBytes { $0.load(as: UInt32.self) }
        logger.info("stopping on \(signo == UInt32(SIGTERM) ? "SIGTERM" : signo == UInt32(SIGINT) ? "SIGINT" : "signal \(signo)")")
        running = false
    }

    func shutdown() {
        notifier?.notify("STOPPING=1")
        for client in Array(clients.values) { disconnect(client, reason: "daemon stopping", level: .info) }
        for d in displays where source.isActive(d.key) { try? source.setActive(d.key, false, token: d.token) }
        logger.info("vsyncd stopped")
    }

    // MARK: - Status and housekeeping

    func statusLine() -> String {
        let on = displays.filter { $0.state == .on }.count
        return "STATUS=\(displays.count) display(s) (\(on) on), \(clients.count) client(s)"
    }

    func publishStatus() {
        guard notifier != nil, statusDirty else { return }
        statusDirty = false
        let status = statusLine()
        if status != lastStatus {
            lastStatus = status
            notifier?.notify(status)
        }
    }

    /// How often housekeeping runs while there is work.
    static let housekeepingNs: UInt64 = 250_000_000
    /// While vblanks arrive, housekeeping rides on them (`housekeepIfDue`) and the timer is only a
    /// fallback for vblanks that stop without an error: a wake-up of its own would cost as much
    /// as a tick.
    static let fallbackHousekeepingNs: UInt64 = 1_000_000_000

    /// The housekeeping timer runs only while there is work (active displays, displays off with
    /// subscribers, stalled clients) or a watchdog to feed: an idle daemon never wakes up.
    func updateHousekeeping() {
        let ticking = displays.contains { source.isActive($0.key) }
        let busy = ticking || displays.contains { $0.state == .off && !$0.subscriptions.isEmpty }
            || blockedClients > 0 || clients.values.contains { !$0.waiting.isEmpty } || source.wantsRescanSoon || rescanAgainAtNs != nil
        var interval: UInt64? = busy ? (ticking ? Self.fallbackHousekeepingNs : Self.housekeepingNs) : nil
        if listenerPausedUntilNs != nil { interval = 100_000_000 }
        if let w = notifier?.watchdogIntervalNs { interval = min(interval ?? w, w) }
        guard interval != housekeepingInterval else { return }
        housekeepingInterval = interval
        if let interval { housekeeping.arm(everyNs: interval) } else { housekeeping.disarm() }
    }

    /// Runs housekeeping from the loop when it is due, so that while vblanks keep the loop
    /// turning the housekeeping timer rarely needs to wake it.
    func housekeepIfDue() {
        guard housekeepingInterval != nil, monotonicNow() &- lastHousekeepingNs >= Self.housekeepingNs else { return }
        doHousekeeping()
    }

    func doHousekeeping() {
        let now = monotonicNow()
        lastHousekeepingNs = now
        if let until = listenerPausedUntilNs, now >= until {
            listenerPausedUntilNs = nil
            do { try register(listener.fd.raw, .listener) } catch { logger.error("\(error)") }
        }
        if let w = notifier?.watchdogIntervalNs, now &- lastWatchdogNs >= w * 9 / 10 {
            lastWatchdogNs = now
            notifier?.notify("WATCHDOG=1")
        }
        let stallNs = UInt64(configuration.stallTimeout * 1e9)
        for client in Array(clients.values) {
            if let since = client.blockedSinceNs, now &- since > stallNs {
                disconnect(client, reason: "socket full for over \(configuration.stallTimeout) s (client stopped reading)", level: .warning)
            }
        }
        // Someone waits for a display that a mode set may light at any moment (no event says
        // so): re-read the cards at every housekeeping turn (4 Hz) until it is there.
        // A card coming up (its node there, not yet openable) is retried at the same rate.
        // Followers of `primary` need a display lit by a mode set (no event either) noticed,
        // so the cards are re-read once a second while one runs: the bounded backstop.
        let waiting = source.wantsRescanSoon || clients.values.contains(where: { !$0.waiting.isEmpty })
        if let again = rescanAgainAtNs, now >= again {
            rescanAgainAtNs = nil
            rescanDisplays(announce: true)
        } else if waiting, now &- lastRescanNs >= Self.housekeepingNs {
            rescanDisplays(announce: true)
        } else if now &- lastRescanNs >= Self.fallbackHousekeepingNs,
                  displays.contains(where: { $0.subscriptions.contains { !$0.paused && $0.followsPrimary && $0.client.features.contains(.followingPrimary) } }) {
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
        updateHousekeeping()
    }
}
