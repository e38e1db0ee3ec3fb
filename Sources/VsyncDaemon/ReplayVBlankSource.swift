import Glibc
import Logging
import VsyncCore

/// Vblanks from a recorded trace (`--source replay:FILE[@SPEED]`, written by
/// `vsync-probe record`): drives the real server, its models and its tick path, from what a
/// kernel once gave, for tests and for bug reports. Not hardware: its ticks are flagged
/// synthetic.
///
/// The trace plays from the daemon's start on its own clock, whether or not anyone listens
/// (as a display's vblanks happen): the trace's timeline compressed SPEED times onto
/// CLOCK_MONOTONIC, trace time t at start + (t − t₀) / SPEED. That is both when an event is
/// applied and a vblank's timestamp, so a timestamp is never ahead of the clock a client
/// compares it with, and what the client sees is a display SPEED times as fast: the mode's
/// refresh and the VRR range's rates × SPEED, intervals / SPEED; sequences are the trace's.
/// The trace's cards and connectors keep their names (`/dev/dri/card1` is `card1`), and each
/// replayed connector's id is its trace display id (traces do not record the kernel's), so
/// selectors name replayed displays as they named the recorded ones. Mode lines and off lines
/// change what `rescan`/`refresh` report, and an off line fails the display's events as a
/// CRTC going off does, so the server finds changes the way it finds them on DRM. After the
/// last line nothing more happens.
final class ReplayVBlankSource: VBlankSource {
    fileprivate struct Replayed {
        var key: DisplayKey
        var connector: String
        var connectorID: UInt32
        /// The trace's device as the kernel names the card: `card1` for `/dev/dri/card1`.
        var card: String
        var mode: (width: UInt16, height: UInt16, refresh: RefreshRate)?
        var active = false
        var token: UInt32 = 0
        /// From trace version 2's `vrr-` lines; nil in a trace without them (as a driver without VRR).
        var variableRefresh: VariableRefreshState?
    }

    private let trace: VBlankTrace
    /// SPEED as a fraction (1.5 is 3/2), so rates and times scale exactly.
    private let speed: ReplaySpeed
    private let logger: Logger
    private let timer: TimerFD
    private var displays: [UInt32: Replayed] = [:]
    private var order: [UInt32] = []
    private var cursor = 0
    private let traceStartNs: UInt64
    private let wallStartNs: UInt64
    private var ended = false

    /// `argument` is FILE or FILE@SPEED (SPEED > 0, e.g. 4 for four times faster).
    init(argument: String, logger: Logger) throws(DaemonError) {
        var path = argument
        var speed = ReplaySpeed.one
        if let at = argument.lastIndex(of: "@"), let s = ReplaySpeed(argument[argument.index(after: at)...]) {
            guard s.numerator > 0, s.numerator <= 1000 * s.denominator else {
                throw .replaySpeed(s)
            }
            path = String(argument[..<at])
            speed = s
        }
        let text = try Self.read(path)
        do {
            trace = try VBlankTrace(parsing: text)
        } catch {
            throw .replayUnreadable(path: path, reason: error.description)
        }
        self.speed = speed
        self.logger = logger
        timer = try TimerFD()
        for d in trace.displays {
            displays[d.id] = Replayed(
                key: DisplayKey(device: "replay:\(d.device)", crtcID: d.crtcID), connector: d.connector,
                connectorID: d.id, card: String(d.device.split(separator: "/").last ?? ""))
            order.append(d.id)
        }
        // Mode and VRR lines before the first vblank describe the start.
        while cursor < trace.events.count, Self.setting(trace.events[cursor], in: &displays) {
            cursor += 1
        }
        traceStartNs = trace.events[cursor...].first?.timeNs ?? 0
        wallStartNs = monotonicNow()
        logger.info(
            "source: replay of \(path) at \(speed)× (\(trace.events.count) events; ticks flagged synthetic; trace time \(traceStartNs) is \(wallStartNs) ns on CLOCK_MONOTONIC)"
        )
        armNext()
    }

    private static func read(_ path: String) throws(DaemonError) -> String {
        guard let file = fopen(path, "r") else {
            throw .replayUnopenable(path: path, errno: errno)
        }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = fread(&chunk, 1, chunk.count, file)
            if n > 0 { bytes += chunk[0..<n] }
            if n < chunk.count { break }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    var isSynthetic: Bool { true }
    var pollDescriptors: [Int32] { [timer.fd.raw] }

    private func sourceDisplay(_ id: UInt32) -> SourceDisplay? {
        guard let d = displays[id] else { return nil }
        return SourceDisplay(
            key: d.key, connectorID: d.connectorID, connectorName: d.connector,
            deviceName: d.card, isActive: d.mode != nil, refresh: d.mode.map { speed.scale($0.refresh) },
            width: d.mode?.width ?? 0, height: d.mode?.height ?? 0,
            variableRefresh: d.variableRefresh.map(speed.scale))
    }

    /// VRR_ENABLED as of the replay's position: the server polls it as it polls DRM's.
    func variableRefreshEnabled(_ key: DisplayKey) -> Bool? {
        order.first { displays[$0]?.key == key }.flatMap { displays[$0]?.variableRefresh?.enabled }
    }

    func rescan() -> [SourceDisplay] { order.compactMap(sourceDisplay) }

    func refresh(_ key: DisplayKey) -> SourceDisplay? {
        order.first { displays[$0]?.key == key }.flatMap(sourceDisplay)
    }

    func setActive(_ key: DisplayKey, _ on: Bool, token: UInt32) throws(VBlankFailure) {
        guard let id = order.first(where: { displays[$0]?.key == key }) else { throw .gone }
        if on && displays[id]?.mode == nil { throw .off }
        displays[id]?.active = on
        displays[id]?.token = token
    }

    func isActive(_ key: DisplayKey) -> Bool {
        order.contains { displays[$0]?.key == key && displays[$0]?.active == true }
    }

    /// Trace time `t` on the daemon's clock: when it is due, and a vblank's timestamp.
    private func due(_ t: UInt64) -> UInt64 {
        wallStartNs &+ speed.compress(t >= traceStartNs ? t - traceStartNs : 0)
    }

    private func armNext() {
        if cursor < trace.events.count { timer.arm(atNs: due(trace.events[cursor].timeNs)) } else { timer.disarm() }
    }

    func readEvents(from fd: Int32, into events: inout [SourceEvent]) {
        guard fd == timer.fd.raw else { return }
        timer.drain()
        let now = monotonicNow()
        while cursor < trace.events.count, due(trace.events[cursor].timeNs) <= now {
            apply(trace.events[cursor], into: &events)
            cursor += 1
        }
        if cursor == trace.events.count, !ended {
            ended = true
            logger.info("replay: end of trace")
        }
    }

    func rearm(into events: inout [SourceEvent]) { armNext() }

    private func apply(_ event: VBlankTrace.Event, into events: inout [SourceEvent]) {
        switch event {
        case .vblank(let id, let sequence, let timestamp):
            guard let d = displays[id], d.active, d.mode != nil else { return }
            events.append(.vblank(token: d.token, sequence: sequence, timestampNs: due(timestamp)))
        case .mode(_, let id, let w, let h, let r):
            displays[id]?.mode = (w, h, r)
        case .variableRefreshCapable, .refreshRange, .variableRefreshEnabled:
            _ = Self.setting(event, in: &displays)
        case .off(_, let id):
            guard let d = displays[id] else { return }
            displays[id]?.mode = nil
            if d.active {
                // As the kernel refuses a wait on a CRTC with no mode: the source clears "wanted".
                displays[id]?.active = false
                events.append(.failed(token: d.token, .off))
            }
        }
    }
}

extension ReplayVBlankSource {
    /// Takes in a setting line (mode, VRR): true if `event` was one. Those before the first
    /// vblank describe the display at the trace's start.
    fileprivate static func setting(_ event: VBlankTrace.Event, in displays: inout [UInt32: Replayed]) -> Bool {
        func vrr(_ id: UInt32, _ change: (inout VariableRefreshState) -> Void) {
            var state = displays[id]?.variableRefresh ?? VariableRefreshState(capable: false, enabled: false)
            change(&state)
            displays[id]?.variableRefresh = state
        }
        switch event {
        case .mode(_, let id, let w, let h, let r): displays[id]?.mode = (w, h, r)
        case .variableRefreshCapable(_, let id, let on): vrr(id) { $0.capable = on }
        case .refreshRange(_, let id, let range): vrr(id) { $0.range = range }
        case .variableRefreshEnabled(_, let id, let on): vrr(id) { $0.enabled = on }
        case .vblank, .off: return false
        }
        return true
    }
}
