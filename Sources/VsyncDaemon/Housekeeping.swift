/// The housekeeping timer and what rides on it: systemd's watchdog and status line. The timer
/// runs only while there is work (`Server.replanIfChanged` decides), so an idle daemon never
/// wakes up.
final class Housekeeping {
    let timer: TimerFD
    let notifier: SystemdNotifier?
    /// The timer's period now; nil while disarmed.
    private(set) var currentIntervalNs: UInt64?
    private(set) var lastRunNs: UInt64 = 0
    private var lastWatchdogNs: UInt64 = 0
    private var lastStatus = ""

    /// How often housekeeping runs while there is work.
    static let intervalNs: UInt64 = 250_000_000
    /// While vblanks arrive, housekeeping rides on them (`isDue`) and the timer is only a
    /// fallback for vblanks that stop without an error: a wake-up of its own would cost as much
    /// as a tick.
    static let fallbackIntervalNs: UInt64 = 1_000_000_000
    /// While the listener is paused: its pause ends on time.
    static let listenerPauseIntervalNs: UInt64 = 100_000_000

    init(notifier: SystemdNotifier?) throws(DaemonError) {
        timer = try TimerFD()
        self.notifier = notifier
    }

    /// Runs the timer every `interval` (nil: not at all), at most as far apart as the watchdog needs.
    func plan(_ interval: UInt64?) {
        var interval = interval
        if let w = notifier?.watchdogIntervalNs { interval = min(interval ?? w, w) }
        guard interval != currentIntervalNs else { return }
        currentIntervalNs = interval
        if let interval { timer.arm(everyNs: interval) } else { timer.disarm() }
    }

    /// Due from the loop: while vblanks keep the loop turning, the timer rarely needs to wake it.
    func isDue(now: UInt64) -> Bool {
        currentIntervalNs != nil && now &- lastRunNs >= Self.intervalNs
    }

    /// A housekeeping turn starts: its time, and systemd's watchdog fed when it is due.
    func started(now: UInt64) {
        lastRunNs = now
        if let w = notifier?.watchdogIntervalNs, now &- lastWatchdogNs >= w * 9 / 10 {
            lastWatchdogNs = now
            notifier?.notify("WATCHDOG=1")
        }
    }

    /// STATUS= to systemd, when it says something new.
    func publish(status: String) {
        guard notifier != nil, status != lastStatus else { return }
        lastStatus = status
        notifier?.notify(status)
    }
}
