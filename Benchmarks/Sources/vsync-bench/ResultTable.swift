import Foundation

/// The results as a Markdown table: readable in a terminal and pasted as-is into PERFORMANCE.md.
enum ResultTable {
    static func render(_ cells: [CellResult]) -> String {
        var out =
            "| clients | Hz | p50 µs ours / C | ×  | p99 µs ours / C | × | p99.9 µs ours / C | max µs ours / C | CPU µs/tick ours / C | × | lost ours / C / C draining | RSS MiB ours / C | sender blocks/tick ours / C | sender preempted/tick ours / C |\n"
        out += "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n"
        for c in cells {
            let o = c.ours
            let r = c.reference
            out += "| \(c.clients) | \(c.rate) "
            out += "| \(pair(o?.p50Us, r?.p50Us)) | \(ratio(c.p50Ratio)) "
            out += "| \(pair(o?.p99Us, r?.p99Us)) | \(ratio(c.p99Ratio)) "
            out += "| \(pair(o?.p999Us, r?.p999Us)) "
            out += "| \(pair(o?.maxUs, r?.maxUs)) "
            out += "| \(pair(o.map { $0.cpuNsPerTick / 1000 }, r.map { $0.cpuNsPerTick / 1000 })) | \(ratio(c.cpuRatio)) "
            out +=
                "| \(o.map { "\($0.lost)" } ?? "–") / \(r.map { "\($0.lost)" } ?? "–") / \(c.referenceDraining.map { "\($0.lost)" } ?? "–") "
            out += "| \(pair(o?.rssMiB, r?.rssMiB)) "
            out += "| \(pair(o?.wakeupsPerTick, r?.wakeupsPerTick)) "
            out += "| \(pair(o?.preemptionsPerTick, r?.preemptionsPerTick)) |\n"
        }
        return out + renderHops(cells)
    }

    /// DisplayLink's p50 split at its reader thread's read: the part up to it is the daemon's
    /// and one wake-up, as the floor's whole; the rest is the hand-over to the callback.
    private static func renderHops(_ cells: [CellResult]) -> String {
        let split = cells.filter { $0.ours?.readP50Us != nil }
        guard !split.isEmpty else { return "" }
        var out = "\n| clients | Hz | C floor p50 µs | vblank → reader's read p50 µs | × floor | → callback µs (rest of p50) | × floor |\n"
        out += "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n"
        for c in split {
            guard let o = c.ours, let read = o.readP50Us else { continue }
            let floor = c.reference?.p50Us
            let rest = o.p50Us - read
            let share = { (v: Double) in floor.map { $0 > 0 ? String(format: "%.2f", v / $0) : "–" } ?? "–" }
            out +=
                "| \(c.clients) | \(c.rate) | \(floor.map(num) ?? "–") | \(num(read)) | \(share(read)) | \(num(rest)) | \(share(rest)) |\n"
        }
        return out
    }

    static func renderIdle(_ rows: [DaemonRun.IdleResult]) -> String {
        var out =
            "| idle phase | clients | wake-ups/s | CPU ms/s | RSS MiB | target ≤ 1 wake-up/s |\n| --- | ---: | ---: | ---: | ---: | --- |\n"
        for r in rows {
            out +=
                "| \(r.phase) | \(r.clients) | \(String(format: "%.2f", r.wakeupsPerSecond)) | \(String(format: "%.3f", r.cpuMsPerSecond)) | \(String(format: "%.1f", r.rssMiB)) | \(r.met ? "met" : "MISSED") |\n"
        }
        return out
    }

    private static func pair(_ a: Double?, _ b: Double?) -> String {
        "\(a.map(num) ?? "–") / \(b.map(num) ?? "–")"
    }

    private static func num(_ v: Double) -> String {
        v >= 100 ? String(format: "%.0f", v) : v >= 10 ? String(format: "%.1f", v) : String(format: "%.2f", v)
    }

    private static func ratio(_ r: Double?) -> String { r.map { String(format: "%.2f", $0) } ?? "–" }
}
