import Glibc
import Logging
import VsyncCore

/// Vblanks from a recorded trace (`--source replay:FILE[@SPEED]`, written by
/// `vsync-probe record`): drives the real server, its models and its tick path, from what a
/// kernel once gave, for tests and for bug reports. Not hardware: its ticks are flagged
/// synthetic.
///
/// The trace plays from the daemon's start on its own clock, whether or not anyone listens
/// (as a display's vblanks happen): event t of the trace is due at start + (t − t₀) / SPEED.
/// Vblank timestamps keep the trace's exact spacing, moved by one constant so the first lies
/// at the start (so at SPEED 1 they are CLOCK_MONOTONIC times a client can compare with its
/// own); sequences are the trace's. Mode lines and off lines change what `rescan`/`refresh`
/// report, and an off line fails the display's events as a CRTC going off does, so the server
/// finds changes the way it finds them on DRM. After the last line nothing more happens.
final class ReplayVBlankSource: VBlankSource {
    fileprivate struct Replayed {
        var key: DisplayKey
        var connector: String
        var mode: (width: UInt16, height: UInt16, refresh: RefreshRate)?
        var active = false
        var token: UInt32 = 0
        /// From trace version 2's `vrr-` lines; nil in a trace without them (as a driver without VRR).
        var variableRefresh: VariableRefreshState?
    }

    private let trace: VBlankTrace
    private let speed: Double
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
        var speed = 1.0
        if let at = argument.lastIndex(of: "@"), let s = Double(argument[argument.index(after: at)...]) {
            guard s > 0, s.isFinite, s <= 1000 else {
                throw DaemonError("replay speed \(s) is out of range: use --source replay:FILE@SPEED with 0 < SPEED ≤ 1000")
            }
            path = String(argument[..<at])
            speed = s
        }
        let text = try Self.read(path)
        do {
            trace = try VBlankTrace(parsing: text)
        } catch {
            throw DaemonError("replay trace \(path) is unreadable, \(error.description): record one with vsync-probe record")
        }
        self.speed = speed
        self.logger = logger
        timer = try TimerFD()
        for d in trace.displays {
            displays[d.id] = Replayed(key: DisplayKey(device: "replay:\(d.device)", crtcID: d.crtcID), connector: d.connector)
            order.append(d.id)
        }
        // Mode and VRR lines before the first vblank describe the start.
        while cursor < trace.events.count, Self.setting(trace.events[cursor], in: &displays) {
            cursor += 1
        }
        traceStartNs = trace.events[cursor...].first?.timeNs ?? 0
        wallStartNs = monotonicNow()
        logger.info("source: replay of \(path) at \(speed)× (\(trace.events.count) events; ticks flagged synthetic; timestamps moved by \(Int64(bitPattern: wallStartNs &- traceStartNs)) ns)")
        armNext()
    }

    private static func read(_ path: String) throws(DaemonError) -> String {
        guard let file = fopen(path, "r") else {
            throw DaemonError("cannot open replay trace \(path): \(errnoText()); give --source replay:FILE with a trace from vsync-probe record")
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
    var pollDescriptors: [Int32] { [timer.fd] }

    private func sourceDisplay(_ id: UInt32) -> SourceDisplay? {
        guard let d = displays[id] else { return nil }
        return SourceDisplay(key: d.key, connectorID: d.key.crtcID, connectorName: d.connector,
                             deviceName: "replay", isActive: d.mode != nil, refresh: d.mode?.refresh,
                             width: d.mode?.width ?? 0, height: d.mode?.height ?? 0, variableRefresh: d.variableRefresh)
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

    /// When trace time `t` is due on the daemon's clock.
    private func due(_ t: UInt64) -> UInt64 {
        wallStartNs &+ UInt64((signedDeltaNs(t, traceStartNs) / speed).rounded())
    }

    private func signedDeltaNs(_ a: UInt64, _ b: UInt64) -> Double { max(0, Double(Int64(bitPattern: a &- b))) }

    private func armNext() {
        if cursor < trace.events.count { timer.arm(atNs: due(trace.events[cursor].timeNs)) } else { timer.disarm() }
    }

    func readEvents(from fd: Int32, into events: inout [SourceEvent]) {
        guard fd == timer.fd else { return }
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
        case let .vblank(id, sequence, timestamp):
            guard let d = displays[id], d.active, d.mode != nil else { return }
            events.append(.vblank(token: d.token, sequence: sequence, timestampNs: timestamp &+ (wallStartNs &- traceStartNs)))
        case let .mode(_, id, w, h, r):
            displays[id]?.mode = (w, h, r)
        case .variableRefreshCapable, .refreshRange, .variableRefreshEnabled:
            _ = Self.setting(event, in: &displays)
        case let .off(_, id):
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
        case let .mode(_, id, w, h, r): displays[id]?.mode = (w, h, r)
        case let .variableRefreshCapable(_, id, on): vrr(id) { $0.capable = on }
        case let .refreshRange(_, id, range): vrr(id) { $0.range = range }
        case let .variableRefreshEnabled(_, id, on): vrr(id) { $0.enabled = on }
        case .vblank, .off: return false
        }
        return true
    }
}
