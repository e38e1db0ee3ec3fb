import Glibc
import VsyncClientCore
import VsyncCore

/// One `page` run: the client's events and the page's reads turned into lines and a summary.
/// It runs on the read loop's thread alone, so it needs no lock.
struct PageReader {
    let json: Bool
    let limit: Int?
    /// The subscription's display, from SUBSCRIBED (0: not there yet).
    private var displayID: UInt32 = 0
    /// Reads that found the display's record, and of them those lit and current.
    private(set) var reads = 0
    private var lit = 0
    private var current = 0
    private var generations: [UInt32] = []
    /// Read time minus the record's last real vblank, for lit records (µs).
    private var lastAgesUs: [Double] = []
    private var firstNs: UInt64 = 0
    private var lastNs: UInt64 = 0
    private(set) var fatal: String?

    init(json: Bool, limit: Int?) {
        self.json = json
        self.limit = limit
    }

    var isDone: Bool { fatal != nil || limit.map { reads >= $0 } ?? false }

    mutating func handle(_ event: ClientEvent) {
        switch event {
        case .subscribed(let answer):
            displayID = answer.displayID
            if answer.isWaiting { Output.line(json ? "{\"event\":\"waiting\"}" : "waiting for the display to appear") }
        case .display(_, let change) where change.kind != .added:
            let name = "\(change.kind)"
            let g = change.display.generation
            Output.line(json ? "{\"event\":\"\(name)\",\"generation\":\(g)}" : "display \(name)  generation \(g)")
        case .error(_, let error):
            switch error {
            case .connectionFailed(_, let errno) where errno == ETIMEDOUT:
                break  // no answer yet, not no daemon: the client keeps trying
            case .displayGone:
                fatal = error.description
            case .noDaemon, .permissionDenied, .refused, .displayNotFound, .connectionFailed:
                // Before the first read the run cannot start; later the client retries.
                if reads == 0 { fatal = error.description } else { Output.error("vsync-probe: warning: \(error.description)") }
            case .connectionLost, .requestFailed, .protocolViolation:
                Output.error("vsync-probe: warning: \(error.description)")
            }
        default: break
        }
    }

    /// Reads the record once; a display not on the page yet is not a read.
    mutating func read(_ client: VsyncClient, nowNs: UInt64) {
        guard displayID != 0 else { return }
        let t: VBlankTiming
        do throws(TimingPageError) {
            t = try client.displayTiming(displayID: displayID)
        } catch .noPage {
            // Connected at protocol 5 brings a page at once; without one the daemon has none.
            if client.isConnected {
                fatal = "vsyncd sent no timing page (it speaks protocol 4 or older, or could not make one): update vsyncd"
            }
            return
        } catch {
            return
        }
        reads += 1
        if reads == 1 { firstNs = nowNs }
        lastNs = nowNs
        if t.isOn { lit += 1 }
        if t.isOn && t.isCurrent { current += 1 }
        if generations.last != t.generation { generations.append(t.generation) }
        let lastAgeUs = Double(Int64(bitPattern: nowNs &- t.lastTimestampNs)) / 1000
        if t.isOn && t.lastTimestampNs != 0 { lastAgesUs.append(lastAgeUs) }
        Output.line(Self.line(t, nowNs: nowNs, json: json))
    }

    static func flagNames(_ t: VBlankTiming) -> [String] {
        let display = DisplayFlags(rawValue: t.flags & 0xFFFF)
        var names: [String] = []
        if t.isOn { names.append("lit") }
        if t.isCurrent { names.append("current") }
        if display.contains(.hardwareClock) { names.append("hardwareClock") }
        if display.contains(.synthetic) { names.append("synthetic") }
        if display.contains(.interruptTimestamps) { names.append("interruptTimestamps") }
        if display.contains(.variable) { names.append("variable") }
        if display.contains(.modelTimed) { names.append("modelTimed") }
        return names
    }

    static func line(_ t: VBlankTiming, nowNs: UInt64, json: Bool) -> String {
        let next = t.nextVBlank(after: nowNs)
        let ageUs = Double(Int64(bitPattern: nowNs &- t.lastTimestampNs)) / 1000
        let updatedUs = Double(Int64(bitPattern: nowNs &- t.updatedNs)) / 1000
        let f = { (v: Double, places: Int) in DecimalText.fixed(v, places: places) }
        if json {
            let nextFields = next.map { ",\"nextSequence\":\($0.sequence),\"nextTimestampNs\":\($0.timestampNs)" } ?? ""
            return "{\"readNs\":\(nowNs),\"displayId\":\(t.displayID),\"generation\":\(t.generation)" + nextFields
                + ",\"periodNs\":\(f(t.periodNs, 3)),\"refreshMillihertz\":\(t.refreshMillihertz)"
                + ",\"lastSequence\":\(t.lastSequence),\"lastTimestampNs\":\(t.lastTimestampNs),\"lastAgeUs\":\(f(ageUs, 1))"
                + ",\"updatedAgeUs\":\(f(updatedUs, 1)),\"flags\":[\(flagNames(t).map { "\"\($0)\"" }.joined(separator: ","))]}"
        }
        let nextText =
            next.map { "next \($0.sequence) in \(f(Double($0.timestampNs &- nowNs) / 1e6, 3)) ms" } ?? "next unknown (not measured)"
        return nextText + "  period \(f(t.periodNs / 1e6, 6)) ms  refresh \(f(Double(t.refreshMillihertz) / 1000, 3)) Hz"
            + "  last vblank \(t.lastSequence) \(f(ageUs / 1000, 1)) ms ago  updated \(f(updatedUs / 1000, 1)) ms ago"
            + "  generation \(t.generation)  flags \(flagNames(t).joined(separator: ","))"
    }

    func printSummary(display: String) {
        let span = Double(lastNs &- firstNs) / 1e9
        let age = Percentiles(lastAgesUs)
        let f = { (v: Double, places: Int) in DecimalText.fixed(v, places: places) }
        if json {
            let ages = age.map { "{\"p50\":\(f($0.p50, 1)),\"p99\":\(f($0.p99, 1)),\"max\":\(f($0.max, 1))}" } ?? "null"
            Output.line(
                "{\"summary\":true,\"reads\":\(reads),\"seconds\":\(f(span, 3)),\"lit\":\(lit),\"current\":\(current),"
                    + "\"generations\":[\(generations.map(String.init).joined(separator: ","))],\"lastAgeUs\":\(ages)}")
        } else if reads == 0 {
            Output.line("summary: no read: the page has no record of \(display) yet (see `vsync-probe list`)")
        } else {
            Output.line(
                "summary: \(reads) reads over \(f(span, 3)) s, lit in \(lit), current in \(current), generations \(generations.map(String.init).joined(separator: " → "))"
                    + (age.map { ", last vblank age ms p50 \(f($0.p50 / 1000, 1)) max \(f($0.max / 1000, 1))" } ?? ""))
        }
    }
}
