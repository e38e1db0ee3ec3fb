/// Android's FrameTimeline in a Perfetto trace: each app frame as an expected and an actual
/// slice (`frame_timeline_event`, TracePacket extension 76), which Perfetto's importer puts on
/// the "Expected Timeline" and "Actual Timeline" tracks of the frame's process and its UI draws
/// as it does an Android app's, jank colours included. Nothing in the importer is Android-only:
/// it keys the tracks by `pid` alone.
extension PerfettoTrace {
    /// FrameTimelineEvent.PresentType. The importer counts 0 (unspecified) as a parse error, so
    /// a frame whose present is not known is `unknown`.
    public enum PresentType: Int32, Sendable {
        case onTime = 1
        case late = 2
        case early = 3
        case dropped = 4
        case unknown = 5
    }

    /// FrameTimelineEvent.PredictionType (0, unspecified, is a parse error as above).
    public enum PredictionType: Int32, Sendable {
        case valid = 1
        case expired = 2
        case unknown = 3
    }

    /// FrameTimelineEvent.JankType, a bitmask. The importer tags a frame "Self Jank" for
    /// `appDeadlineMissed`, `appResyncedJitter` and `unknown`, "Other Jank" for the
    /// compositor's and display's bits, and draws it by that.
    public struct JankType: OptionSet, Sendable, Hashable {
        public let rawValue: Int32
        public init(rawValue: Int32) { self.rawValue = rawValue }
        public static let none = JankType(rawValue: 1)
        public static let sfScheduling = JankType(rawValue: 2)
        public static let predictionError = JankType(rawValue: 4)
        public static let displayHAL = JankType(rawValue: 8)
        public static let sfCpuDeadlineMissed = JankType(rawValue: 16)
        public static let sfGpuDeadlineMissed = JankType(rawValue: 32)
        public static let appDeadlineMissed = JankType(rawValue: 64)
        public static let bufferStuffing = JankType(rawValue: 128)
        public static let unknown = JankType(rawValue: 256)
        public static let sfStuffing = JankType(rawValue: 512)
        public static let dropped = JankType(rawValue: 1024)
        public static let nonAnimating = JankType(rawValue: 2048)
        public static let appResyncedJitter = JankType(rawValue: 4096)
        public static let displayNotOn = JankType(rawValue: 8192)
        public static let displayModeChange = JankType(rawValue: 16384)
        public static let displayPowerModeChange = JankType(rawValue: 32768)
    }

    /// One app frame: what was expected of it and what happened.
    public struct SurfaceFrame: Sendable, Equatable {
        /// The frame's token (the importer names the slices by it): unique per frame of a
        /// process, since the importer draws one expected slice per token and process.
        public var token: Int64
        /// The display frame the app frame went to; the importer needs it, and links the two
        /// when a display frame with this token is in the trace. The target vblank's sequence.
        public var displayFrameToken: Int64
        public var pid: Int32
        /// The layer, surface or link the frame was drawn for (shown in the slice's details).
        public var layerName: String
        /// When the frame's work was expected to start and to end (its deadline).
        public var expectedStartNs: UInt64
        public var expectedEndNs: UInt64
        /// When it started (the app got its tick) and ended (its work was done).
        public var actualStartNs: UInt64
        public var actualEndNs: UInt64
        public var presentType: PresentType
        public var onTimeFinish: Bool
        public var gpuComposition: Bool
        public var jankType: JankType
        public var predictionType: PredictionType
        /// Actual present − predicted present, in ms, when the present is known.
        public var presentDelayMillis: Float?

        public init(
            token: Int64, displayFrameToken: Int64, pid: Int32, layerName: String,
            expectedStartNs: UInt64, expectedEndNs: UInt64, actualStartNs: UInt64, actualEndNs: UInt64,
            presentType: PresentType, onTimeFinish: Bool, gpuComposition: Bool = false,
            jankType: JankType, predictionType: PredictionType = .valid, presentDelayMillis: Float? = nil
        ) {
            self.token = token
            self.displayFrameToken = displayFrameToken
            self.pid = pid
            self.layerName = layerName
            self.expectedStartNs = expectedStartNs
            self.expectedEndNs = expectedEndNs
            self.actualStartNs = actualStartNs
            self.actualEndNs = actualEndNs
            self.presentType = presentType
            self.onTimeFinish = onTimeFinish
            self.gpuComposition = gpuComposition
            self.jankType = jankType
            self.predictionType = predictionType
            self.presentDelayMillis = presentDelayMillis
        }
    }

    /// FrameTimelineEvent's fields (frameworks_native_trace_packet.proto).
    enum FrameEvent {
        static let expectedSurfaceFrameStart: UInt32 = 3
        static let actualSurfaceFrameStart: UInt32 = 4
        static let frameEnd: UInt32 = 5
    }

    /// Writes a frame as SurfaceFlinger does: the expected slice's start and end, then the
    /// actual slice's start (with the verdict) and end, each a packet stamped with its time,
    /// each slice's two packets tied by a cookie unique in the trace. The importer sorts
    /// packets by time, so a frame is written once its facts are all known, after later ones.
    public mutating func surfaceFrame(_ f: SurfaceFrame) {
        cookies += 1
        let expected = cookies
        cookies += 1
        let actual = cookies
        frameTimelineEvent(at: f.expectedStartNs) { e in
            e.message(FrameEvent.expectedSurfaceFrameStart) { s in
                s.int64(1, expected)  // cookie
                s.int64(2, f.token)  // token
                s.int64(3, f.displayFrameToken)  // display_frame_token
                s.int32(4, f.pid)  // pid
                s.string(5, f.layerName)  // layer_name
            }
        }
        frameEnd(at: max(f.expectedEndNs, f.expectedStartNs), cookie: expected)
        frameTimelineEvent(at: f.actualStartNs) { e in
            e.message(FrameEvent.actualSurfaceFrameStart) { s in
                s.int64(1, actual)  // cookie
                s.int64(2, f.token)  // token
                s.int64(3, f.displayFrameToken)  // display_frame_token
                s.int32(4, f.pid)  // pid
                s.string(5, f.layerName)  // layer_name
                s.int32(6, f.presentType.rawValue)  // present_type
                s.bool(7, f.onTimeFinish)  // on_time_finish
                s.bool(8, f.gpuComposition)  // gpu_composition
                s.int32(9, f.jankType.rawValue)  // jank_type
                s.int32(10, f.predictionType.rawValue)  // prediction_type
                if let delay = f.presentDelayMillis { s.float(13, delay) }  // present_delay_millis
            }
        }
        frameEnd(at: max(f.actualEndNs, f.actualStartNs), cookie: actual)
    }

    private mutating func frameEnd(at ns: UInt64, cookie: Int64) {
        frameTimelineEvent(at: ns) { e in
            e.message(FrameEvent.frameEnd) { end in end.int64(1, cookie) }  // cookie
        }
    }

    private mutating func frameTimelineEvent(at ns: UInt64, _ body: (inout ProtobufWriter) -> Void) {
        packet(at: ns) { p in p.message(Packet.frameTimelineEvent, body) }
    }
}
