import VsyncCore

/// A link's hangs in its trace file: a slice named `hang` on a track `hangs <context>` in the
/// app's process group, next to its Expected and Actual Timeline, from the hang's start to its
/// end, with the stuck thread's stack as an argument. A track of the context's rather than a
/// thread's: a queue's deliveries run on whichever worker thread, and its waiting frames on none.
///
/// The begin is written when the detector reports the hang, while the context is still stuck,
/// and the end when it moves again: a hang that never ends (the process is killed, or stops
/// watching while it hangs) is still in the file, drawn to the end of the trace ("Did not
/// end"), from where it began. An instant at report time and the whole slice at the end would
/// show such a hang only as a mark where it was seen.
struct HangSlices {
    /// The innermost frames kept of a stack: the hung code and its callers, bounded in size.
    static let stackFrames = 16

    private var tracks: [String: PerfettoTrace.Track] = [:]
    /// Each context's hang whose begin is written and whose end is not.
    private var open: [String: HangDetector.Hang] = [:]

    mutating func record(_ event: HangDetector.Event, process: PerfettoTrace.Track, into trace: inout PerfettoTrace) {
        switch event {
        case .began(let hang):
            let track = close(before: hang, process, &trace)
            trace.begin(on: track, name: "hang", atNs: hang.sinceNanoseconds, arguments: Self.arguments(hang))
            open[hang.context] = hang
        case .ended(let hang, let ns):
            let end = hang.sinceNanoseconds &+ ns
            let duration = PerfettoTrace.Argument.double("duration_ms", Double(ns) / 1e6)
            if let began = open[hang.context], began.id == hang.id, began.sinceNanoseconds == hang.sinceNanoseconds {
                let track = self.track(hang.context, process, &trace)
                trace.end(on: track, atNs: end, arguments: [duration])
                open[hang.context] = nil
            } else {
                // It began before the trace was opened: all of it now.
                let track = close(before: hang, process, &trace)
                trace.slice(
                    on: track, name: "hang", startNs: hang.sinceNanoseconds, endNs: end, arguments: Self.arguments(hang) + [duration])
            }
        }
    }

    /// The context's track, with any hang still open on it ended first: one whose end was never
    /// seen (the link stopped watching while it hung, then watched again), which must end
    /// before the next begins since slices on a track nest.
    private mutating func close(before hang: HangDetector.Hang, _ process: PerfettoTrace.Track, _ trace: inout PerfettoTrace)
        -> PerfettoTrace.Track
    {
        let track = self.track(hang.context, process, &trace)
        if let stale = open.removeValue(forKey: hang.context) {
            trace.end(
                on: track, atNs: max(stale.sinceNanoseconds, hang.sinceNanoseconds),
                arguments: [.string("end", "not seen: the link stopped watching while it hung")])
        }
        return track
    }

    private mutating func track(_ context: String, _ process: PerfettoTrace.Track, _ trace: inout PerfettoTrace) -> PerfettoTrace.Track {
        if let track = tracks[context] { return track }
        let track = trace.track(named: "hangs " + context, parent: process)
        tracks[context] = track
        return track
    }

    static func arguments(_ hang: HangDetector.Hang) -> [PerfettoTrace.Argument] {
        var arguments: [PerfettoTrace.Argument] = [
            .string(
                "kind", hang.kind == .running ? "running: the callback has not returned" : "waiting: a frame waits for the busy context"),
            .double("detected_after_ms", Double(hang.detectedNanoseconds &- hang.sinceNanoseconds) / 1e6),
        ]
        if let stack = hang.stack {
            var text = HangStack(frames: Array(stack.frames.prefix(stackFrames)), threadID: stack.threadID).description
            if stack.frames.count > stackFrames { text += "\n… \(stack.frames.count - stackFrames) more frames" }
            arguments += [.uint("thread_id", UInt64(stack.threadID)), .string("stack", text)]
        } else if let why = hang.stackUnavailable {
            arguments.append(.string("stack_unavailable", why))
        }
        return arguments
    }
}
