import ProcessTools
import Dispatch
import DisplayLink
import Glibc
import Synchronization
import VsyncCore

/// One DisplayLink of a worker and the checks on its tick stream.
///
/// For every delivered tick: the sequence is a multiple of the divisor, `targetTimestamp` is
/// `divisor` frames after `timestamp`, and timestamps and sequences increase. For two
/// consecutive ticks with no rate change, pause or resume near them, nothing vanished uncounted:
/// `(seq2 − seq1) / divisor − 1 == skipped2`, and the divisor is the one the rate asks for.
final class LinkProbe: Sendable {
    /// How far around a change request a tick pair is not checked: the daemon restarts its
    /// skipped count when it handles the request, which may come a little before or after
    /// neighbouring vblanks are sent (its event loop, the socket and the reader thread lag;
    /// on a loaded 2-core machine by hundreds of ms).
    static let changeWindowNs: UInt64 = 500_000_000
    static let maxSamples = 5

    let link: DisplayLink
    let keepsUp: Bool
    /// The display's refresh as vsyncd announces it (the timer source's exact rate).
    let refreshHz: Double
    private let queue: DispatchQueue
    private let checker: Checker

    /// The stream's state, shared with the link's handler (a class: a Mutex cannot be captured).
    final class Checker: Sendable {
        let state = Mutex(State())
    }

    struct State {
        var last: DisplayLink.Frame?
        var lastDivisor: UInt64 = 0
        /// CLOCK_MONOTONIC ns of recent rate changes, pauses and resumes.
        var changes: [UInt64] = []
        var range = FrameRateRange.default
        var paused = false
        var slowMicroseconds: UInt32 = 0
        var frames = 0
        /// Frames the handler saw, including those `injectLoss` hid from the checks.
        var seen = 0
        var checkedPairs = 0
        var skipped = 0
        var violations = 0
        var violationSamples: [String] = []
        var errors = 0
        var errorSamples: [String] = []

        /// When the last change was asked, relative to a tick (for violation messages).
        var lastChange: UInt64?

        func requestAge(_ ts: UInt64) -> String {
            guard let t = lastChange else { return " (no change ever asked)" }
            return " (last change asked \((Int64(bitPattern: ts &- t)) / 1_000_000) ms before this tick)"
        }

        mutating func noteChange() {
            let now = Monotonic.nanoseconds
            changes.append(now)
            lastChange = now
        }

        mutating func violation(_ text: String) {
            violations += 1
            if violationSamples.count < LinkProbe.maxSamples { violationSamples.append(text) }
        }
    }

    init(socket: String, refreshHz: Double, keepsUp: Bool, label: String, injectLoss: Bool = false) {
        self.refreshHz = refreshHz
        let checker = Checker()
        self.checker = checker
        self.keepsUp = keepsUp
        queue = DispatchQueue(label: label)
        link = DisplayLink(display: .primary, socketPath: socket) { link in
            guard let frame = link.currentFrame else { return }
            let slow = checker.state.withLock { s -> UInt32 in
                s.seen += 1
                // The soak's self-test: hide one tick in 100 from the checks, as if it were lost.
                if injectLoss && s.seen % 100 == 50 { return 0 }
                return LinkProbe.observe(frame, refreshHz: refreshHz, &s)
            }
            if slow > 0 { usleep(slow) }
        }
        link.errorHandler = { error in
            checker.state.withLock { s in
                s.errors += 1
                if s.errorSamples.count < LinkProbe.maxSamples { s.errorSamples.append(error.description) }
            }
        }
    }

    func start() { link.start(on: queue) }

    func invalidate() { link.invalidate() }

    var isPaused: Bool { checker.state.withLock { $0.paused } }

    /// Pauses or resumes; the change is noted before the request goes out.
    func setPaused(_ paused: Bool) {
        checker.state.withLock { s in
            s.paused = paused
            s.noteChange()
        }
        link.isPaused = paused
    }

    func setFramesPerSecond(_ fps: Int) {
        checker.state.withLock { s in
            s.range = FrameRateRange(preferredFramesPerSecond: fps)
            s.noteChange()
        }
        link.preferredFramesPerSecond = fps
    }

    func setRange(_ range: FrameRateRange) {
        checker.state.withLock { s in
            s.range = range
            s.noteChange()
        }
        link.preferredFrameRateRange = range
    }

    /// A handler that takes `microseconds` per frame (0: fast), to make the library and the
    /// daemon coalesce and count skipped ticks.
    func setSlow(microseconds: UInt32) { checker.state.withLock { $0.slowMicroseconds = microseconds } }

    /// Adds this link's counts to a worker's report.
    func tally(into r: inout WorkerReport) {
        checker.state.withLock { s in
            r.frames += s.frames
            r.checkedPairs += s.checkedPairs
            r.skipped += s.skipped
            if keepsUp {
                r.keepUpFrames += s.frames
                r.keepUpSkipped += s.skipped
                r.keepUpCheckedPairs += s.checkedPairs
            }
            r.violations += s.violations
            for v in s.violationSamples where r.violationSamples.count < Self.maxSamples { r.violationSamples.append(v) }
            r.errors += s.errors
            for e in s.errorSamples where r.errorSamples.count < Self.maxSamples { r.errorSamples.append(e) }
        }
    }

    /// Checks one delivered frame against the previous one; returns how long to sleep (slow handler).
    private static func observe(_ f: DisplayLink.Frame, refreshHz: Double, _ s: inout State) -> UInt32 {
        s.frames += 1
        s.skipped += f.skipped
        defer { s.last = f }
        let ts = f.timestampNanoseconds, target = f.targetTimestampNanoseconds, period = f.durationNanoseconds
        guard period > 0 else {
            s.violation("seq \(f.sequence): duration is 0")
            return s.slowMicroseconds
        }
        guard target > ts else {
            s.violation("seq \(f.sequence): targetTimestamp \(target) is not after timestamp \(ts)")
            return s.slowMicroseconds
        }
        let interval = Double(target - ts)
        let divisor = UInt64(max(1, (interval / Double(period)).rounded()))
        if abs(interval - Double(divisor * period)) > 0.01 * Double(period) {
            s.violation("seq \(f.sequence): target − timestamp = \(target - ts) ns is not a whole number of \(period) ns frames")
        }
        if f.sequence % divisor != 0 {
            s.violation("seq \(f.sequence) is not a multiple of divisor \(divisor)")
        }
        defer { s.lastDivisor = divisor }
        guard let last = s.last else { return s.slowMicroseconds }
        if f.sequence <= last.sequence || ts <= last.timestampNanoseconds {
            s.violation("seq \(f.sequence) at \(ts) came after seq \(last.sequence) at \(last.timestampNanoseconds)")
            return s.slowMicroseconds
        }
        // Forget changes too old to matter to this pair or any later one.
        let windowStart = last.timestampNanoseconds &- changeWindowNs
        s.changes.removeAll { $0 < windowStart }
        let nearChange = s.changes.contains { $0 <= ts + changeWindowNs }
        guard !nearChange else { return s.slowMicroseconds }

        s.checkedPairs += 1
        let expected = UInt64(RateMapping.divisor(for: s.range, refreshHz: refreshHz))
        // A divisor change this far from any request is a request applied late on a loaded
        // machine (the check below says whether it is the divisor asked for); gaps across it
        // are not comparable.
        if divisor == s.lastDivisor {
            let gap = (f.sequence - last.sequence) / divisor - 1
            if gap != UInt64(f.skipped) {
                s.violation("seq \(last.sequence) → \(f.sequence) at divisor \(divisor): \(gap) ticks missing, skipped says \(f.skipped)\(s.requestAge(ts))")
            }
        }
        if expected != divisor {
            s.violation("seq \(f.sequence): divisor \(divisor), but \(s.range) at \(refreshHz) Hz maps to \(expected)\(s.requestAge(ts))")
        }
        return s.slowMicroseconds
    }
}
