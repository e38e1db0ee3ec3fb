import Foundation
import Histogram
import ProcessTools
import Synchronization

/// The client's measurements. Callbacks come on the link's serial queue and signals on the
/// same queue, so the mutex is never contended; it is there to make that sharing checkable.
final class Recorder: Sendable {
    private struct State {
        var recording = false
        /// Ticks stamped outside it are not recorded (nil: every tick while recording).
        var window: Range<UInt64>?
        var sawTick = false
        var onFirstTick: (@Sendable () -> Void)?
        var histogram = Histogram<UInt64>(
            lowestDiscernibleValue: 1, highestTrackableValue: 60_000_000_000,
            numberOfSignificantValueDigits: .three)
        /// DisplayLink only: from the vblank to its reader thread's read of the tick, the hop
        /// before the callback's own (on a queue, the hand-over to the queue's thread).
        var readHistogram = Histogram<UInt64>(
            lowestDiscernibleValue: 1, highestTrackableValue: 60_000_000_000,
            numberOfSignificantValueDigits: .three)
        var previousSequence: UInt64?
        var received: UInt64 = 0
        var lost: UInt64 = 0
        var skipped: UInt64 = 0
        var divisor: UInt64 = 1
        var notes: [String] = []
        var finished = false
    }

    private let index: Int
    private let state = Mutex(State())

    init(index: Int) { self.index = index }

    var onFirstTick: (@Sendable () -> Void)? {
        get { state.withLock { $0.onFirstTick } }
        set { state.withLock { $0.onFirstTick = newValue } }
    }

    func startRecording(window: Range<UInt64>? = nil) {
        state.withLock { s in
            s.recording = true
            s.window = window
            s.previousSequence = nil
            s.histogram.reset()
            s.readHistogram.reset()
            s.received = 0
            s.lost = 0
            s.skipped = 0
        }
    }

    func record(
        entryNs: UInt64, timestampNs: UInt64, sequence: UInt64, skipped: Int,
        intervalNs: UInt64, durationNs: UInt64, readNs: UInt64? = nil
    ) {
        let first = state.withLock { s -> (@Sendable () -> Void)? in
            defer { s.sawTick = true }
            guard s.recording else { return s.sawTick ? nil : s.onFirstTick }
            if let w = s.window, !w.contains(timestampNs) { return nil }
            if durationNs > 0 && intervalNs > 0 {
                s.divisor = max(1, (intervalNs + durationNs / 2) / durationNs)
            }
            _ = s.histogram.record(entryNs > timestampNs ? entryNs - timestampNs : 0)
            if let readNs { _ = s.readHistogram.record(readNs > timestampNs ? readNs - timestampNs : 0) }
            s.received += 1
            s.skipped += UInt64(max(0, skipped))
            if let previous = s.previousSequence, sequence > previous + s.divisor {
                s.lost += (sequence - previous) / s.divisor - 1
            }
            s.previousSequence = sequence
            return nil
        }
        first?()
    }

    /// The window vsync-bench wrote: "START END", ns.
    static func readWindow(_ path: String) -> Range<UInt64>? {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return nil }
        let v = text.split(whereSeparator: \.isWhitespace).compactMap { UInt64($0) }
        return v.count == 2 && v[0] < v[1] ? v[0]..<v[1] : nil
    }

    func note(_ text: String) {
        state.withLock { s in if s.notes.count < 20 { s.notes.append(text) } }
    }

    func finish(exitCode: Int32) -> Never {
        let report = state.withLock { s in
            ClientReport(
                index: index, received: s.received, lost: s.lost, skipped: s.skipped, divisor: s.divisor,
                latencyNs: s.histogram.recordedValues().map { [$0.value, UInt64($0.count)] },
                notes: s.notes,
                readLatencyNs: s.readHistogram.totalCount > 0
                    ? s.readHistogram.recordedValues().map { [$0.value, UInt64($0.count)] } : nil)
        }
        let encoder = JSONEncoder()
        var line = (try? encoder.encode(report)) ?? Data("{}".utf8)
        line.append(0x0A)
        FileHandle.standardOutput.write(line)
        exit(exitCode)
    }
}
