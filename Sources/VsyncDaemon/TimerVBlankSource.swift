import Glibc
import VsyncCore

/// A software vblank clock (`--source timer:HZ`) for benchmarks and machines without a display.
///
/// Vblank n is at `epoch + n · period` exactly, so sequences and timestamps are ideal and the
/// sequence keeps counting while nobody listens (as a real vblank counter does). A periodic
/// timerfd wakes the loop only while the display is active; it is re-anchored to the ideal
/// timeline every `rearmEvery` vblanks (its interval is whole nanoseconds, the period is not), so
/// the steady state costs one read per vblank (after the tick is sent) and no timerfd_settime.
/// Its display is named "timer" and its ticks are flagged synthetic.
final class TimerVBlankSource: VBlankSource {
    static let key = DisplayKey(device: "timer", crtcID: 0)

    let rate: RefreshRate
    private let periodNs: Double
    private let epochNs: UInt64
    private let timer: TimerFD
    private var active = false
    private var token: UInt32 = 0
    private var lastSequence: UInt64?
    /// Sequence at which the periodic timer must be re-anchored (drift ≤ 1 ns per vblank).
    private var rearmAt: UInt64 = 0
    private static let rearmEvery: UInt64 = 1024
    /// What `rearm` owes the timer after the last `readEvents`.
    private enum Rearm {
        case none, drain
        case anchor(UInt64)
    }
    private var pendingRearm = Rearm.none

    init(hertz: Double) throws(DaemonError) {
        guard hertz.isFinite, hertz >= 1, hertz <= 1000 else {
            throw .timerRate(hertz: hertz)
        }
        rate = RefreshRate(hertz: hertz)
        periodNs = rate.periodNanoseconds
        epochNs = monotonicNow()
        timer = try TimerFD()
    }

    var isSynthetic: Bool { true }
    var pollDescriptors: [Int32] { [timer.fd.raw] }

    private var display: SourceDisplay {
        SourceDisplay(
            key: Self.key, connectorID: 0, connectorName: "timer", deviceName: "timer",
            isActive: true, refresh: rate, width: 0, height: 0)
    }

    func rescan() -> [SourceDisplay] { [display] }

    func refresh(_ key: DisplayKey) -> SourceDisplay? { key == Self.key ? display : nil }

    func setActive(_ key: DisplayKey, _ on: Bool, token: UInt32) throws(VBlankFailure) {
        guard key == Self.key else { throw .gone }
        self.token = token
        guard on != active else { return }
        active = on
        if on { armNext(after: monotonicNow()) } else { timer.disarm() }
    }

    func isActive(_ key: DisplayKey) -> Bool { key == Self.key && active }

    private func timestamp(_ sequence: UInt64) -> UInt64 {
        epochNs + UInt64((Double(sequence) * periodNs).rounded())
    }

    private func sequence(at now: UInt64) -> UInt64 {
        now <= epochNs ? 0 : UInt64((Double(now - epochNs) / periodNs).rounded(.down))
    }

    /// Anchors the periodic timer at the next vblank after `now`. The interval is rounded up so
    /// the timer never fires before a vblank boundary (an early fire would find no new sequence).
    private func armNext(after now: UInt64) {
        var next = sequence(at: now) + 1
        if let last = lastSequence, next <= last { next = last + 1 }
        timer.arm(atNs: timestamp(next), everyNs: UInt64(periodNs.rounded(.up)))
        rearmAt = next &+ Self.rearmEvery
    }

    /// The sequence comes from the clock, not from the timer's expiration count, so the tick
    /// goes out before the timer is read (`rearm`).
    func readEvents(from fd: Int32, into events: inout [SourceEvent]) {
        guard fd == timer.fd.raw else { return }
        pendingRearm = .drain
        guard active else { return }
        let now = monotonicNow()
        var seq = sequence(at: now)
        // Rounding can put `now` a hair before the boundary the timer fired for.
        if timestamp(seq + 1) <= now { seq += 1 }
        if lastSequence.map({ seq > $0 }) ?? true {
            lastSequence = seq
            events.append(.vblank(token: token, sequence: seq, timestampNs: timestamp(seq)))
            if seq >= rearmAt { pendingRearm = .anchor(now) }
        } else {
            // Fired with no new vblank (drift or a clock step): re-anchor.
            pendingRearm = .anchor(now)
        }
    }

    func rearm(into events: inout [SourceEvent]) {
        switch pendingRearm {
        case .none: break
        // A periodic timerfd fires again only once read. Setting it anew (armNext) clears its
        // count as a read would, and an inactive timer was already disarmed by setActive.
        case .drain: timer.drain()
        case .anchor(let now): if active { armNext(after: now) }
        }
        pendingRearm = .none
    }
}
