import Foundation
import Glibc
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
/// full. The tests bound those rather than forbid them: on a 2-core machine shared with
/// compilers, the daemon's wake-up is sometimes late by a frame whatever the clients do.
final class TickWatcher: Sendable {
    struct Report: Sendable {
        var ticks = 0
        var firstSequence: UInt64?
        var lastSequence: UInt64?
        /// Silent gaps: consecutive ticks whose sequences differ by more than divisor × (skipped + 1).
        var gaps: [String] = []
        /// Announced gaps: ticks that came with skipped > 0, and the ticks they say were missed.
        var announced: [String] = []
        var skippedTicks = 0
        var maxSkipped: UInt32 = 0
        /// Times the stream went quiet for 0.5 s, or ended.
        var stalls: [String] = []
        var setupError: String?
        /// Largest receive time minus tick timestamp seen, in ns.
        var maxLatenessNs: UInt64 = 0
    }

    private let report = Mutex(Report())
    private let stopping = Atomic<Bool>(false)
    private let started = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)

    init(socketPath: String) {
        let thread = Thread { [self] in
            defer { finished.signal() }
            let client: RawClient
            let divisor: UInt64
            do {
                client = try RawClient(path: socketPath)
                try client.handshake(name: "good-client")
                divisor = UInt64(try client.subscribe(1, fps: 20).divisor)
            } catch {
                report.withLock { $0.setupError = "\(error)" }
                started.signal()
                return
            }
            started.signal()
            while !stopping.load(ordering: .relaxed) {
                guard let tick = client.nextTick(timeout: 0.5) else {
                    if !stopping.load(ordering: .relaxed) {
                        report.withLock { $0.stalls.append("no tick for 0.5 s after sequence \($0.lastSequence.map(String.init) ?? "none")") }
                    }
                    continue
                }
                let lateness = monotonicNowNs() &- tick.timestampNs
                report.withLock { r in
                    if lateness < 10_000_000_000 { r.maxLatenessNs = max(r.maxLatenessNs, lateness) }
                    if let last = r.lastSequence, tick.sequence != last + divisor * (UInt64(tick.skipped) + 1) {
                        r.gaps.append("sequence \(last) → \(tick.sequence), skipped \(tick.skipped)")
                    }
                    if tick.skipped > 0, r.lastSequence != nil {
                        r.announced.append("sequence \(r.lastSequence ?? 0) → \(tick.sequence), skipped \(tick.skipped)")
                        r.skippedTicks += Int(tick.skipped)
                        r.maxSkipped = max(r.maxSkipped, tick.skipped)
                    }
                    if r.firstSequence == nil { r.firstSequence = tick.sequence }
                    r.lastSequence = tick.sequence
                    r.ticks += 1
                }
            }
        }
        thread.start()
        started.wait()
    }

    var current: Report { report.withLock { $0 } }

    /// Announced gaps allowed in a run: at most 5 % of the ticks delivered, and never more than
    /// 3 ticks in a row (a 150 ms hole at 20 fps). See the type's comment for why not zero.
    static func announcedGapsAreWithinBound(_ r: Report) -> Bool {
        r.skippedTicks * 20 <= max(r.ticks, 60) && r.maxSkipped <= 3
    }

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

