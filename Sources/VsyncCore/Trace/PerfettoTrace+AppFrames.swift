extension PerfettoTrace {
    /// One app's frames in a trace, as they come: a process group holding the display's
    /// vblanks and FrameTimeline's expected and actual timeline of each frame, its jank type
    /// being the frame's ``FrameJankReason``. What `vsync-probe follow --trace-out` and
    /// DisplayLink's ``FrameMonitor`` write.
    public struct AppFrames: Sendable {
        public let pid: Int32
        /// The frames' layer name (the display link or the subscription followed).
        public let layerName: String
        /// The process's track: the group its frames, vblanks and other tracks of the app go in.
        public let process: Track
        private let vblanks: Track
        private var lastVBlank: UInt64?
        private var tokens: Int64 = 0

        /// Declares the process's track and its vblank track in `trace`.
        public init(trace: inout PerfettoTrace, pid: Int32, processName: String, layerName: String) {
            self.pid = pid
            self.layerName = layerName
            process = trace.process(pid: pid, name: processName)
            vblanks = trace.track(named: "vblank " + layerName, parent: process)
        }

        /// Writes a frame: its tick's vblank (once per vblank) and its surface frame, its token
        /// counting from 1, its display frame token the target vblank's sequence.
        public mutating func record(_ tick: FrameTick, facts: FrameFacts, jank: FrameJank, into trace: inout PerfettoTrace) {
            if lastVBlank.map({ tick.sequence > $0 }) ?? true {
                trace.vblank(
                    on: vblanks, timestampNs: tick.timestampNs, sequence: tick.sequence,
                    predicted: tick.flags.contains(.predicted))
                lastVBlank = tick.sequence
            }
            tokens += 1
            trace.surfaceFrame(
                SurfaceFrame(
                    token: tokens, displayFrameToken: Int64(truncatingIfNeeded: tick.targetSequence), pid: pid,
                    layerName: layerName, facts: facts, jank: jank))
        }
    }
}
