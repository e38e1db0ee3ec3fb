import Foundation
import Glibc
import TestSupport
import Synchronization
import Testing
import VsyncCore

// Helpers for BadInputTests. The daemon and the raw protocol client come from the daemon
// tests' harness (DaemonHarness.swift: DaemonProcess, RawClient); these add what the bad-input
// tests need on top: a good client watched for gaps, /proc readings, and the bad datagrams.

/// A good client that reads ticks on its own thread, so it keeps up while the test thread plays
/// the bad clients. Records every gap.
///
/// It subscribes at 20 fps (divisor 3 on the 60 Hz timer): the daemon's small per-client socket
/// buffer holds about 20 ticks, so at 20 fps a reader descheduled for up to ~1 s on a loaded
/// 2-core machine still keeps up.
///
/// Two kinds of gap: a *silent* one (the sequence jumps by more than `skipped` accounts for: a
/// tick lost without telling the client) is always a bug. An *announced* one (`skipped > 0`)
/// means the daemon did not deliver a due tick and said so: its own wake-up came more than a
/// frame late (the timer source then skips vblanks, as a real display would), or the socket was
/// full. On a machine shared with compilers the daemon is kept off the CPU for whole frames at
/// a time, whatever the clients do; what it owns is that it misses no frame otherwise. So each
/// announced gap must be explained, by the kernel's account of the daemon's main thread: its
/// time runnable but not running (`/proc/PID/task/PID/schedstat`), which grows each time it
/// gets the CPU back, read every few ms. To miss a due vblank the daemon must not get back to
/// its loop for that vblank's whole frame; on a busy machine it is preempted again and again in
/// that frame, so its waits come in pieces. The gap is explained when, from the first tick
/// skipped to the tick after them (the daemon got the CPU back before sending it), those waits
/// add up to 90 % of a frame (the timer's slack) for each tick skipped; or when this client was
/// half a second or more behind when the first tick skipped was due (its socket holds about a
/// second of ticks, so it may have been full). A daemon that misses frames while it may run,
/// busy with a bad client or not, is not excused.
final class TickWatcher: Sendable {
    struct Report: Sendable {
        var ticks = 0
        /// The subscription's divisor: ticks are due on its multiples.
        var divisor: UInt64 = 1
        var firstSequence: UInt64?
        var lastSequence: UInt64?
        /// Silent gaps: consecutive ticks whose sequences differ by more than divisor × (skipped + 1).
        var gaps: [String] = []
        /// Announced gaps: ticks that came with skipped > 0, and the ticks they say were missed.
        var announced: [String] = []
        /// Announced gaps (and stalls) that the daemon's waits for a CPU and this client's
        /// lateness do not explain.
        var unexplained: [String] = []
        var skippedTicks = 0
        var maxSkipped: UInt32 = 0
        /// Times the stream went quiet for 0.5 s, or ended, except while the daemon was kept
        /// off the CPU (the gap after it then says so).
        var stalls: [String] = []
        var setupError: String?
        /// Largest receive time minus tick timestamp seen, in ns.
        var maxLatenessNs: UInt64 = 0
    }

    private let report = Mutex(Report())
    private let stopping = Atomic<Bool>(false)
    private let started = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)

    /// How often the reader looks at the daemon's waits: well under a frame, so that the waits
    /// can be placed against the frames skipped.
    static let sampleEvery = 0.004

    /// `daemonPID`: the vsyncd serving `socketPath`, whose waits for a CPU explain the gaps.
    init(socketPath: String, daemonPID: Int32) {
        let thread = Thread { [self] in
            defer { finished.signal() }
            let client: RawClient
            let divisor: UInt64
            let periodNs: UInt64
            do {
                client = try RawClient(path: socketPath)
                try client.handshake(name: "good-client")
                let subscribed = try client.subscribe(1, fps: 20)
                divisor = UInt64(subscribed.divisor)
                periodNs = subscribed.displayIntervalNs
                report.withLock { $0.divisor = divisor }
            } catch {
                report.withLock { $0.setupError = "\(error)" }
                started.signal()
                return
            }
            started.signal()
            // The daemon's waits for a CPU so far, read every few ms over the last few seconds.
            var waits: [(readNs: UInt64, waitNs: UInt64)] = []
            var lastTickNs = monotonicNowNs()
            // When this thread read the recent ticks, and their vblanks' times: how far behind
            // it was at any moment of the last few seconds.
            var reads: [(readNs: UInt64, timestampNs: UInt64)] = []
            var stall: String?
            while !stopping.load(ordering: .relaxed) {
                let received = client.receive(timeout: Self.sampleEvery)
                let now = monotonicNowNs()
                // Nil when unreadable: then no gap is explained by it.
                let wait = ProcReadings.runQueueWaitNs(pid: daemonPID)
                if let wait {
                    waits.append((now, wait))
                    if waits.count > 2048 { waits.removeFirst(1024) }
                }
                guard case .message(.tick(let tick)) = received else {
                    if case .closed = received {
                        report.withLock { $0.stalls.append("the stream ended after sequence \($0.lastSequence.map(String.init) ?? "none")") }
                        return
                    }
                    if stall == nil, now &- lastTickNs >= 500_000_000, !stopping.load(ordering: .relaxed) {
                        stall = "no tick for 0.5 s after sequence \(report.withLock { $0.lastSequence.map(String.init) ?? "none" })"
                    }
                    continue
                }
                let lateness = now &- tick.timestampNs
                // The first tick skipped was due `divisor` frames after the last one read.
                let firstSkippedNs = (reads.last?.timestampNs ?? 0) &+ divisor &* periodNs
                // The daemon's waits since then (none known if the readings do not reach back).
                let waitThen = waits.last { $0.readNs <= firstSkippedNs }?.waitNs
                let waited = wait.flatMap { w in waitThen.map { w >= $0 ? w - $0 : 0 } } ?? 0
                let newestReadByThen = reads.last { $0.readNs <= firstSkippedNs }?.timestampNs ?? 0
                let behindNs = firstSkippedNs &- newestReadByThen
                let explained = waited >= UInt64(tick.skipped) * periodNs * 9 / 10
                    || (behindNs >= 500_000_000 && behindNs < 10_000_000_000)
                report.withLock { r in
                    if lateness < 10_000_000_000 { r.maxLatenessNs = max(r.maxLatenessNs, lateness) }
                    if let last = r.lastSequence, tick.sequence != last + divisor * (UInt64(tick.skipped) + 1) {
                        r.gaps.append("sequence \(last) → \(tick.sequence), skipped \(tick.skipped)")
                    }
                    let gap = "sequence \(r.lastSequence ?? 0) → \(tick.sequence), skipped \(tick.skipped): vsyncd kept off the CPU \(waited / 1000) µs since the first was due, this client \(behindNs / 1000) µs behind when the first was due"
                    if tick.skipped > 0, r.lastSequence != nil {
                        if !explained { r.unexplained.append(gap) }
                        r.announced.append(gap)
                        r.skippedTicks += Int(tick.skipped)
                        r.maxSkipped = max(r.maxSkipped, tick.skipped)
                    }
                    // A stall ended by a gap the daemon's waits explain was the daemon kept off the CPU.
                    if let stall, !(tick.skipped > 0 && explained && waited > 0) { r.stalls.append(stall) }
                    if r.firstSequence == nil { r.firstSequence = tick.sequence }
                    r.lastSequence = tick.sequence
                    r.ticks += 1
                }
                stall = nil
                lastTickNs = now
                reads = Array((reads + [(now, tick.timestampNs)]).suffix(64))
            }
            if let stall { report.withLock { $0.stalls.append(stall) } }
        }
        thread.start()
        started.wait()
    }

    var current: Report { report.withLock { $0 } }

    /// Waits (bounded) until `count` ticks have arrived.
    func waitForTicks(_ count: Int, timeout: Double) -> Bool {
        waitUntil(timeout: timeout) { current.ticks >= count }
    }

    /// Stops the reader thread (it notices within 0.5 s) and returns what it saw.
    @discardableResult
    func stop() -> Report {
        stopping.store(true, ordering: .relaxed)
        _ = finished.wait(timeout: .now() + 3)
        return current
    }
}

/// Polls `condition` every 10 ms until it holds or `timeout` seconds pass.
func waitUntil(timeout: Double, _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if condition() { return true }
        usleep(10_000)
    }
    return condition()
}

/// Open file descriptors of a process: the entries of /proc/PID/fd.
func openFDCount(_ pid: Int32, sourceLocation: SourceLocation = #_sourceLocation) -> Int {
    // An unreadable fd directory is a failed test, not 0 open fds: "fds back to the baseline"
    // must not pass because nothing was counted.
    guard let fds = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd"), !fds.isEmpty else {
        Issue.record("cannot count the open fds of \(pid) in /proc/\(pid)/fd", sourceLocation: sourceLocation)
        return -1
    }
    return fds.count
}

/// Resident set size of a process in KiB (VmRSS in /proc/PID/status). Fails the test rather than return 0 when /proc cannot be read: "RSS flat" must not pass
/// because nothing was measured.
func residentKiB(_ pid: Int32, sourceLocation: SourceLocation = #_sourceLocation) throws -> Int {
    let status = try #require(try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
                              "cannot read /proc/\(pid)/status", sourceLocation: sourceLocation)
    let line = try #require(status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") },
                            "no VmRSS in /proc/\(pid)/status", sourceLocation: sourceLocation)
    let kib = try #require(Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? ""),
                           "unreadable VmRSS line: \(line)", sourceLocation: sourceLocation)
    try #require(kib > 0, "VmRSS of \(pid) is 0", sourceLocation: sourceLocation)
    return kib
}

/// What a bad client saw after sending its datagram: the messages, then whether the server closed.
struct BadClientOutcome: CustomStringConvertible {
    var messages: [ServerMessage] = []
    var closed = false
    var description: String { "\(messages.map { "\($0.type)" }) closed: \(closed)" }

    var error: ErrorMessage? {
        for case .error(let e) in messages { return e }
        return nil
    }

    var refusal: Refusal? {
        for case .refused(let r) in messages { return r }
        return nil
    }
}

extension RawClient {
    /// Reads until the server closes the connection or `timeout` seconds pass, skipping ticks.
    func outcome(timeout: Double = 3) -> BadClientOutcome {
        var out = BadClientOutcome()
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            switch receive(timeout: max(0, deadline.timeIntervalSinceNow)) {
            case .closed: out.closed = true; return out
            case .timeout, .undecodable: return out
            case .message(.tick): continue
            case .message(let m): out.messages.append(m)
            }
        }
        return out
    }
}

/// The bad datagrams, built from real encoded messages so each breaks exactly one rule.
enum BadDatagram {
    static let hello = ClientMessage.hello(Hello(minVersion: 1, maxVersion: 1, clientName: "bad")).encoded()

    /// Sets the header's size field (to the true length unless told otherwise).
    static func sized(_ bytes: [UInt8], sizeField: Int? = nil) -> [UInt8] {
        var b = bytes
        let size = sizeField ?? b.count
        b[2] = UInt8(truncatingIfNeeded: size)
        b[3] = UInt8(truncatingIfNeeded: size >> 8)
        return b
    }

    /// `count` bytes of a request of `type`, with a truthful size field.
    static func request(type: UInt16, count: Int, fill: UInt8 = 0) -> [UInt8] {
        var b = [UInt8](repeating: fill, count: count)
        b[0] = UInt8(type & 0xFF)
        b[1] = UInt8(type >> 8)
        b[4] = 0; b[5] = 0; b[6] = 0; b[7] = 0
        return sized(b)
    }
}

extension VsyncdTests.BadInput {
    /// Clients that come and go: connect and close at once; handshake and close; subscribe
    /// and close without unsubscribing; send garbage and close without reading the answer.
    func openCloseLoop(_ daemon: DaemonProcess, iterations: Int) throws -> Int {
        var done = 0
        for i in 0..<iterations {
            let c = try RawClient(path: daemon.socketPath)
            switch i % 4 {
            case 0: break
            case 1: try c.handshake(name: "loop")
            case 2:
                try c.handshake(name: "loop")
                _ = try c.subscribe(1, fps: 0)
            default:
                c.send([0xDE, 0xAD, 0xBE, 0xEF, 0, 0, 0, 0])
            }
            done += 1
        }
        return done
    }
}
