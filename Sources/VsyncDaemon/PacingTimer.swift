/// One absolute CLOCK_MONOTONIC timer for every paced subscription's wake (see
/// Server+Pacing.swift), armed at the earliest of them.
final class PacingTimer {
    let timer: TimerFD
    /// Where it is armed now; nil while disarmed.
    private var armedNs: UInt64?

    init() throws(DaemonError) { timer = try TimerFD() }

    /// Arms it at `earliest`, or disarms it. `fired`: it expired and was not read, so it is set
    /// (or disarmed) anew even to the same deadline, which clears its count.
    func arm(at earliest: UInt64?, fired: Bool) {
        guard fired || earliest != armedNs else { return }
        armedNs = earliest
        if let earliest { timer.arm(atNs: earliest) } else { timer.disarm() }
    }
}
