import Glibc

/// How both senders are scheduled (`--sender-sched`): vsyncd and the C floor's sender get the
/// same, so that under contention neither is favoured. The default is vsyncd.service's
/// (`CPUSchedulingPolicy=rr`, `CPUSchedulingPriority=1`); the clients keep the bench's own.
struct SenderScheduling: CustomStringConvertible, Sendable {
    enum Policy: String, Sendable { case other, rr, fifo }
    let policy: Policy
    /// The nice value for `other`, the real-time priority for `rr` and `fifo`.
    let value: Int32

    static let unitDefault = SenderScheduling(policy: .rr, value: 1)

    /// "rr:1", "fifo:10", "other:-10", or "other" (nice 0, the bench's own scheduling).
    init?(_ text: String) {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard let policy = parts.first.flatMap({ Policy(rawValue: String($0)) }), parts.count <= 2 else { return nil }
        let value = parts.count == 2 ? Int32(parts[1]) : (policy == .other ? 0 : nil)
        guard let value, policy == .other ? (-20...19).contains(value) : (1...99).contains(value) else { return nil }
        self.init(policy: policy, value: value)
    }

    init(policy: Policy, value: Int32) {
        self.policy = policy
        self.value = value
    }

    var description: String { policy == .other ? "nice \(value)" : "SCHED_\(policy.rawValue.uppercased()) \(value)" }

    /// fanout.c's options for the same scheduling (`--nice N`, `--rr P`, `--fifo P`).
    var fanoutArguments: [String] {
        switch policy {
        case .other: value == 0 ? [] : ["--nice", "\(value)"]
        case .rr: ["--rr", "\(value)"]
        case .fifo: ["--fifo", "\(value)"]
        }
    }

    /// Applies it to process `pid` (vsyncd, once spawned). Returns why not, or nil.
    func apply(to pid: pid_t) -> String? {
        let failed: Bool
        switch policy {
        case .other:
            failed = value != 0 && setpriority(__priority_which_t(PRIO_PROCESS.rawValue), id_t(pid), value) != 0
        case .rr, .fifo:
            var param = sched_param(sched_priority: value)
            failed = sched_setscheduler(pid, policy == .rr ? SCHED_RR : SCHED_FIFO, &param) != 0
        }
        guard failed else { return nil }
        return
            "setting vsyncd's scheduling to \(self) failed: \(String(cString: strerror(errno))); run as root or pass --sender-sched other"
    }
}
