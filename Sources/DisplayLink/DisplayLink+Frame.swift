import VsyncClientCore
import VsyncCore

extension DisplayLink {
    /// What a tick's flags say about where its timestamp came from.
    public typealias Flags = TickFlags

    /// One frame tick as the link delivers it: the vblank it belongs to and the deadline of the
    /// next one. Times are CLOCK_MONOTONIC, the clock of ``DisplayLink/currentTime()``.
    public struct Frame: Sendable, Equatable {
        /// The newest vblank, in ns.
        public var timestampNanoseconds: UInt64
        /// The predicted time of the vblank this frame is for (``targetSequence``), in ns: the
        /// deadline for the frame being prepared.
        public var targetTimestampNanoseconds: UInt64
        /// The display's frame interval at its maximum rate, in ns.
        public var durationNanoseconds: UInt64
        /// The 64-bit sequence number of the newest vblank.
        public var sequence: UInt64
        /// The vblank this frame is for: the next one at the link's rate, or with a
        /// ``DisplayLink/workDuration`` the one the wake-up was aimed at.
        public var targetSequence: UInt64
        /// The target and up to three later vblanks at the link's rate, with predicted times.
        public var frameTimelines: FrameTimelines
        /// Frames at this link's rate that were not delivered since the previous delivered one
        /// (the daemon's and the library's coalescing together).
        public var skipped: Int
        /// Hardware timestamp, predicted, synthetic.
        public var flags: Flags
        /// When the library read this tick from the socket, in ns (for latency measurements).
        public var receivedNanoseconds: UInt64
        /// The display's configuration generation (protocol 4; 0 from an older vsyncd): it
        /// differs from the previous frame's after any change of mode, on/off or timing model
        /// reset, so one comparison tells whether predictions and rates still hold.
        public var generation: UInt32

        /// A frame from its parts (for tests and replays; links make their own).
        public init(
            timestampNanoseconds: UInt64, targetTimestampNanoseconds: UInt64, durationNanoseconds: UInt64,
            sequence: UInt64, skipped: Int, flags: Flags, receivedNanoseconds: UInt64,
            targetSequence: UInt64? = nil, frameTimelines: FrameTimelines? = nil, generation: UInt32 = 0
        ) {
            self.generation = generation
            self.timestampNanoseconds = timestampNanoseconds
            self.targetTimestampNanoseconds = targetTimestampNanoseconds
            self.durationNanoseconds = durationNanoseconds
            self.sequence = sequence
            let target = targetSequence ?? sequence &+ 1
            self.targetSequence = target
            self.frameTimelines =
                frameTimelines
                ?? FrameTimelines([FrameTimeline(sequence: target, presentationNs: targetTimestampNanoseconds)])
            self.skipped = skipped
            self.flags = flags
            self.receivedNanoseconds = receivedNanoseconds
        }

        init(_ frame: ClientFrame) {
            self.init(
                timestampNanoseconds: frame.timestampNs, targetTimestampNanoseconds: frame.targetTimestampNs,
                durationNanoseconds: frame.displayIntervalNs, sequence: frame.sequence,
                skipped: Int(frame.skipped), flags: frame.flags, receivedNanoseconds: frame.receivedNs,
                targetSequence: frame.targetSequence, frameTimelines: frame.timelines, generation: frame.generation)
        }

        /// ``timestampNanoseconds`` in seconds, like `CADisplayLink.timestamp`.
        public var timestamp: Double { MonotonicClock.seconds(timestampNanoseconds) }
        /// ``targetTimestampNanoseconds`` in seconds, like `CADisplayLink.targetTimestamp`.
        public var targetTimestamp: Double { MonotonicClock.seconds(targetTimestampNanoseconds) }
        /// ``durationNanoseconds`` in seconds, like `CADisplayLink.duration`.
        public var duration: Double { MonotonicClock.seconds(durationNanoseconds) }
        /// `targetTimestamp - timestamp`: the real frame time at this link's rate.
        public var interval: Double { targetTimestamp - timestamp }
        /// True when no display is behind the tick (vsyncd's timer source).
        public var isSynthetic: Bool { flags.contains(.synthetic) }
        /// Variable refresh (VRR) is on (protocol 5): there is no grid, so
        /// ``targetTimestampNanoseconds`` and the ``frameTimelines`` are the *earliest* each
        /// vblank can come (the newest vblank plus k × the shortest interval), and
        /// ``durationNanoseconds`` is that shortest interval (VK_EXT_present_timing's
        /// `refreshDuration`; its `refreshInterval` would be unknown). The link's
        /// ``DisplayLink/minimumInterval`` and ``DisplayLink/maximumInterval`` give the range.
        public var isVariable: Bool { flags.contains(.variable) }
        /// The display is on but vsyncd samples its vblanks sparsely (protocol 6, vsyncd(8)
        /// `--vblank-sampling sparse`): its vblank interrupt sleeps, so ``timestampNanoseconds``
        /// is the refresh model's prediction of the vblank, ``sequence`` the kernel's count.
        public var isModelTimed: Bool { flags.contains(.modelTimed) }
    }

    /// A change to the link's display, for ``DisplayLink/displayChangeHandler``.
    public enum DisplayChange: Sendable, Equatable {
        /// The mode or refresh rate changed; re-read ``DisplayLink/duration`` and
        /// ``DisplayLink/maximumFramesPerSecond``.
        case modeChanged(refreshHz: Double)
        /// The display turned off: ticks stop until it is back on.
        case off
        /// The display turned back on.
        case on
        /// Variable refresh (VRR) turned on or off (protocol 5): frames say ``Frame/isVariable``
        /// from now on, or no longer; the generation changed once.
        case variableRefresh(isOn: Bool)
        /// No such display yet (vsyncd started before the display was lit): frames start when
        /// it appears, without asking again.
        case waiting
    }
}
