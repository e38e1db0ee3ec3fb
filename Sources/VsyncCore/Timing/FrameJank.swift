/// Why a frame was late, in the spirit of Android's FrameTimeline (SurfaceFlinger's
/// `SurfaceFrame::classifyJankLocked`): a frame presented within 2 ms of its predicted present
/// is on time; one that presented late and whose work ended late missed its own deadline
/// unless its tick reached it late; one that finished in time but presented a whole number of
/// vsyncs off was scheduled off its vblank; any other offset is the model's prediction error.
/// The display's own state comes first: no frame can be on time on a dark display.
///
/// The raw values are libvsync's `enum vsync_frame_reason`, part of its ABI: never renumber a
/// case; a new one takes the next value.
public enum FrameJankReason: UInt32, Sendable, Hashable, CaseIterable {
    /// Presented within the present threshold of the predicted vblank.
    case onTime = 0
    /// The app's work took longer than the time it had (its tick came on time).
    case appDeadlineMissed = 1
    /// The daemon sent the tick late: the daemon's side of delivery.
    case daemonLate = 2
    /// The tick was sent on time but reached the app late: the machine's scheduler (the app's
    /// reader thread or the link's context did not run).
    case deliveryLate = 3
    /// Finished in time, presented a whole number of vsyncs off its target: held for a later
    /// vblank (or shown an earlier one) by whoever presents it.
    case presentScheduling = 4
    /// Finished in time, presented off its target by a fraction of a vsync: the vblank did not
    /// come when the display's model said.
    case predictionError = 5
    /// Finished in time, presented later than the earliest vblank under variable refresh: the
    /// display waited, which no grid explains.
    case variableRefresh = 6
    /// The display was off: nothing was presented.
    case displayOff = 7
    /// The tick was the model's, sent while the display was off (predict-while-off).
    case predictedWhileOff = 8
    /// The display's mode changed between the tick and the present.
    case modeChange = 9
    /// The facts do not say (present not known, or finished late yet presented early).
    case unknown = 10

    /// The reason's name in JSON output and reports: the case's name.
    public var name: String {
        switch self {
        case .onTime: "onTime"
        case .appDeadlineMissed: "appDeadlineMissed"
        case .daemonLate: "daemonLate"
        case .deliveryLate: "deliveryLate"
        case .presentScheduling: "presentScheduling"
        case .predictionError: "predictionError"
        case .variableRefresh: "variableRefresh"
        case .displayOff: "displayOff"
        case .predictedWhileOff: "predictedWhileOff"
        case .modeChange: "modeChange"
        case .unknown: "unknown"
        }
    }

    /// The FrameTimelineEvent jank bits Perfetto draws for the reason. The daemon stands where
    /// SurfaceFlinger does (the system's frame scheduler): its late send is the compositor's
    /// CPU deadline missed, the scheduler's late delivery and a presentation held for a later
    /// vblank are its scheduling (the two told apart by `on_time_finish`), and variable
    /// refresh's wait is the display's own (Display HAL).
    public var perfettoJankType: PerfettoTrace.JankType {
        switch self {
        case .onTime: .none
        case .appDeadlineMissed: .appDeadlineMissed
        case .daemonLate: .sfCpuDeadlineMissed
        case .deliveryLate, .presentScheduling: .sfScheduling
        case .predictionError: .predictionError
        case .variableRefresh: .displayHAL
        case .displayOff, .predictedWhileOff: .displayNotOn
        case .modeChange: .displayModeChange
        case .unknown: .unknown
        }
    }
}

/// What the display was doing for a frame.
public enum FrameDisplayState: Sendable, Hashable {
    case on
    /// Variable refresh on: the predicted present is the earliest the vblank could come.
    case variable
    case off
    /// The tick's timestamps came from the model while the display was off.
    case predictedWhileOff
    /// The mode (or the model, with the display's configuration generation) changed between
    /// the tick and the present.
    case modeChanged
}

/// The facts of one app frame, all CLOCK_MONOTONIC ns.
public struct FrameFacts: Sendable, Equatable {
    /// The target vblank's predicted time (the tick's `targetTimestamp`): the frame's deadline
    /// and the present it was aimed at.
    public var predictedPresentNs: UInt64
    /// The display's refresh period (the tick's display interval), for the whole-vsync rule.
    public var periodNs: UInt64
    /// When the tick was due at the app: the commit point, target − work duration, with a
    /// work duration; else the vblank the tick follows. See ``dueNs(targetNs:workDurationNs:vblankNs:)``.
    public var dueNs: UInt64
    /// When the daemon sent the tick; nil when the daemon does not say.
    public var sentNs: UInt64?
    /// When the app's side read the tick.
    public var receivedNs: UInt64
    /// When the app's work for the frame ended.
    public var workEndedNs: UInt64
    /// The vblank that showed the frame (see ``FrameJank/presentVBlank(workEndedNs:referenceSequence:referenceNs:periodNs:)``);
    /// nil when not known.
    public var presentNs: UInt64?
    public var display: FrameDisplayState
    /// When the app's context finished its previous frame: a tick that waited for the app's
    /// own earlier work was late by the app's doing, not delivery's. Nil when not known.
    public var contextFreeNs: UInt64?

    public init(
        predictedPresentNs: UInt64, periodNs: UInt64, dueNs: UInt64, sentNs: UInt64? = nil, receivedNs: UInt64,
        workEndedNs: UInt64, presentNs: UInt64?, display: FrameDisplayState = .on, contextFreeNs: UInt64? = nil
    ) {
        self.predictedPresentNs = predictedPresentNs
        self.periodNs = periodNs
        self.dueNs = dueNs
        self.sentNs = sentNs
        self.receivedNs = receivedNs
        self.workEndedNs = workEndedNs
        self.presentNs = presentNs
        self.display = display
        self.contextFreeNs = contextFreeNs
    }

    /// When a tick is due: a paced tick (work duration W > 0) at its target − W, the commit
    /// point; an unpaced one at the vblank it follows.
    public static func dueNs(targetNs: UInt64, workDurationNs: UInt64, vblankNs: UInt64) -> UInt64 {
        workDurationNs > 0 ? (targetNs > workDurationNs ? targetNs - workDurationNs : 0) : vblankNs
    }
}

/// The thresholds, FrameTimeline's defaults (`JankClassificationThresholds`).
public struct FrameJankThresholds: Sendable, Equatable {
    /// A present this close to the predicted one is on time (2 ms).
    public var presentNs: UInt64
    /// Work ending this long after the deadline still finished on time (0).
    public var deadlineNs: UInt64
    /// A tick reaching the app (or leaving the daemon) this long after it was due is still on
    /// time (2 ms, FrameTimeline's start threshold).
    public var startNs: UInt64

    public init(presentNs: UInt64 = 2_000_000, deadlineNs: UInt64 = 0, startNs: UInt64 = 2_000_000) {
        self.presentNs = presentNs
        self.deadlineNs = deadlineNs
        self.startNs = startNs
    }

    public static let frameTimeline = FrameJankThresholds()
}

/// A frame's verdict, and how Perfetto's FrameTimeline shows it.
public struct FrameJank: Sendable, Equatable {
    public var reason: FrameJankReason
    public var presentType: PerfettoTrace.PresentType
    /// The work ended by the deadline (the predicted present), within the deadline threshold.
    public var onTimeFinish: Bool
    /// Present − predicted present; 0 when the present is not known.
    public var presentDelayNs: Int64

    /// Whether the frame counts as late (anything but on time).
    public var isLate: Bool { reason != .onTime }

    public var predictionType: PerfettoTrace.PredictionType {
        switch reason {
        case .predictedWhileOff: .expired  // no real vblank behind the prediction
        case .displayOff: .unknown
        default: .valid
        }
    }

    /// Classifies one frame.
    public static func classify(_ f: FrameFacts, thresholds t: FrameJankThresholds = .frameTimeline) -> FrameJank {
        let onTimeFinish = f.workEndedNs <= f.predictedPresentNs &+ t.deadlineNs
        let delay = f.presentNs.map { Int64(bitPattern: $0 &- f.predictedPresentNs) }
        func verdict(_ reason: FrameJankReason, _ present: PerfettoTrace.PresentType) -> FrameJank {
            FrameJank(reason: reason, presentType: present, onTimeFinish: onTimeFinish, presentDelayNs: delay ?? 0)
        }
        let presentType: PerfettoTrace.PresentType
        if let delay {
            presentType = delay.magnitude <= t.presentNs ? .onTime : delay > 0 ? .late : .early
        } else {
            presentType = .unknown
        }
        switch f.display {
        case .off: return verdict(.displayOff, .unknown)
        case .predictedWhileOff: return verdict(.predictedWhileOff, .unknown)
        case .modeChanged: return verdict(.modeChange, presentType)
        case .on, .variable: break
        }
        guard let delay else { return verdict(.unknown, .unknown) }
        switch presentType {
        case .onTime:
            return verdict(.onTime, .onTime)
        case .early:
            guard onTimeFinish else { return verdict(.unknown, .early) }
            return verdict(wholeVsyncs(delay, f.periodNs, t) ? .presentScheduling : .predictionError, .early)
        default:
            break
        }
        if !onTimeFinish { return verdict(lateFinish(f, t), .late) }
        if f.display == .variable { return verdict(.variableRefresh, .late) }
        return verdict(wholeVsyncs(delay, f.periodNs, t) ? .presentScheduling : .predictionError, .late)
    }

    /// Whose the late finish was. The app had from the tick's due time to the deadline; if its
    /// own work (receipt to end) fit in that but the tick came more than the start threshold
    /// late, delivery made it miss: the daemon's if it sent late, else the scheduler's between
    /// the send and the receipt (without the send time, late delivery is the scheduler's). A
    /// tick that waited for the app's context to finish its previous frame is late from then.
    static func lateFinish(_ f: FrameFacts, _ t: FrameJankThresholds) -> FrameJankReason {
        let budget = f.predictedPresentNs > f.dueNs ? f.predictedPresentNs - f.dueNs : 0
        let work = f.workEndedNs > f.receivedNs ? f.workEndedNs - f.receivedNs : 0
        let from = max(f.dueNs, f.contextFreeNs ?? 0)
        let lag = f.receivedNs > from ? f.receivedNs - from : 0
        guard lag > t.startNs, work <= budget &+ t.deadlineNs else { return .appDeadlineMissed }
        if let sent = f.sentNs, sent > f.dueNs, sent - f.dueNs > t.startNs { return .daemonLate }
        return .deliveryLate
    }

    /// FrameTimeline's rule: an offset within the present threshold of a multiple of the period.
    /// Without a period the offset cannot be one.
    static func wholeVsyncs(_ delay: Int64, _ periodNs: UInt64, _ t: FrameJankThresholds) -> Bool {
        guard periodNs > 0 else { return false }
        let rest = delay.magnitude % periodNs
        return rest < t.presentNs || rest >= periodNs &- t.presentNs
    }

    /// The vblank that showed a frame whose work ended at `workEndedNs`: the first at or after
    /// it on the display's grid through a vblank whose time is known (the reference), the frame
    /// being queued for the first vblank that finds it ready. Returns its sequence and time.
    public static func presentVBlank(
        workEndedNs: UInt64, referenceSequence: UInt64, referenceNs: UInt64, periodNs: UInt64
    ) -> (sequence: UInt64, timestampNs: UInt64) {
        guard periodNs > 0 else { return (referenceSequence, referenceNs) }
        if workEndedNs <= referenceNs {
            let back = (referenceNs - workEndedNs) / periodNs  // whole periods still at or after the end
            return (referenceSequence &- back, referenceNs - back * periodNs)
        }
        let ahead = (workEndedNs - referenceNs + periodNs - 1) / periodNs
        return (referenceSequence &+ ahead, referenceNs &+ ahead * periodNs)
    }
}

extension PerfettoTrace.SurfaceFrame {
    /// The app frame a classified frame's facts make: expected from the tick's due time to the
    /// predicted present, actual from its receipt to the end of its work.
    public init(token: Int64, displayFrameToken: Int64, pid: Int32, layerName: String, facts f: FrameFacts, jank: FrameJank) {
        self.init(
            token: token, displayFrameToken: displayFrameToken, pid: pid, layerName: layerName,
            expectedStartNs: f.dueNs, expectedEndNs: f.predictedPresentNs,
            actualStartNs: f.receivedNs, actualEndNs: f.workEndedNs,
            presentType: jank.presentType, onTimeFinish: jank.onTimeFinish,
            jankType: jank.reason.perfettoJankType, predictionType: jank.predictionType,
            presentDelayMillis: f.presentNs == nil ? nil : Float(Double(jank.presentDelayNs) / 1e6))
    }
}
