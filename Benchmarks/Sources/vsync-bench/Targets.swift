/// One cell of the matrix with both sides, their ratios and the targets they are held to.
struct CellResult: Codable {
    var clients: Int
    var rate: Int
    var seconds: Double
    /// Alternating rounds each side ran; the sides' figures combine them (`SideResult.combining`).
    var rounds = 1
    var ours: SideResult?
    var reference: SideResult?
    /// The C floor whose clients drain to the newest tick, as ours do: ours lose ticks by
    /// design when they fall behind, so "lost" is judged against this floor too.
    var referenceDraining: SideResult?
    var targets: [Target] = []
    /// For a script judging the cell: lost ticks on the draining floor (set by `evaluate`).
    var lostDraining: UInt64?

    var p50Ratio: Double? { ratio(\.p50Us) }
    var p99Ratio: Double? { ratio(\.p99Us) }
    var cpuRatio: Double? { ratio(\.cpuNsPerTick) }

    private func ratio(_ key: KeyPath<SideResult, Double>) -> Double? {
        guard let o = ours?[keyPath: key], let r = reference?[keyPath: key], r > 0 else { return nil }
        return o / r
    }

    /// The targets: p50 and p99 at most 1.25× the reference for N ≤ 100; sender CPU per tick at most
    /// 1.5× the reference; no tick lost by clients that keep up; RSS at most 32 MiB at 100 clients.
    mutating func evaluate() {
        targets = []
        lostDraining = referenceDraining?.lost
        guard let ours else { return }
        // A cell where not every client got a first tick measured fewer clients than it names.
        if let live = ours.clientsLive {
            targets.append(Target(cell: self, name: "clients without a first tick", measured: Double(clients - live), limit: 0, unit: ""))
        }
        if clients <= 100 {
            if let r = p50Ratio { targets.append(Target(cell: self, name: "p50 latency", measured: r, limit: 1.25, unit: "×")) }
            if let r = p99Ratio { targets.append(Target(cell: self, name: "p99 latency", measured: r, limit: 1.25, unit: "×")) }
        }
        if let r = cpuRatio { targets.append(Target(cell: self, name: "CPU per tick", measured: r, limit: 1.5, unit: "×")) }
        // Lost: none beyond what the draining floor loses on the same machine in the same run.
        targets.append(
            Target(
                cell: self, name: "ticks lost (draining floor's: \(referenceDraining?.lost ?? 0))",
                measured: Double(ours.lost), limit: Double(referenceDraining?.lost ?? 0), unit: ""))
        if clients == 100 {
            targets.append(Target(cell: self, name: "RSS", measured: ours.rssMiB, limit: 32, unit: " MiB"))
        }
    }
}

struct Target: Codable {
    var clients: Int
    var rate: Int
    var name: String
    var measured: Double
    var limit: Double
    var unit: String
    var met: Bool

    init(cell: CellResult, name: String, measured: Double, limit: Double, unit: String) {
        self.clients = cell.clients
        self.rate = cell.rate
        self.name = name
        self.measured = measured
        self.limit = limit
        self.unit = unit
        self.met = measured <= limit
    }

    var line: String {
        let fmt = { (v: Double) in
            unit == "×" ? String(format: "%.2f×", v) : unit.isEmpty ? String(format: "%.0f", v) : String(format: "%.1f%@", v, unit)
        }
        return "\(met ? "met   " : "MISSED") N=\(clients) @ \(rate) Hz  \(name): \(fmt(measured)) (target ≤ \(fmt(limit)))"
    }
}
