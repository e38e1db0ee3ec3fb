// libvsync's C API (include/vsync/vsync.h) over the client core. Compiled with Embedded Swift
// together with the core's and the protocol's own source files (the symlinks beside this file),
// so the library needs only libc and the protocol stays defined once.
import CVsyncABI
internal import CVsyncSys

/// A `struct vsync_client`: the core plus the links handed out on it.
final class CClient {
    let core: VsyncClient
    /// The links by subscription id. This dictionary owns them; handles are unretained.
    var links: [UInt32: CLink] = [:]
    /// The last error's line, NUL-terminated, for `vsync_client_last_error`.
    var lastError: [CChar] = [0]
    var dispatching = false

    init(core: VsyncClient) { self.core = core }

    func remember(_ error: ClientError) { lastError = cString(error.description) }
}

/// A `struct vsync_link`.
final class CLink {
    /// Strong: the client's `links` owns the link, and destroying either breaks the cycle.
    let client: CClient
    let id: UInt32
    let frameFn: vsync_frame_fn?
    var displayFn: vsync_display_fn?
    var errorFn: vsync_error_fn?
    let user: UnsafeMutableRawPointer?

    init(client: CClient, id: UInt32, frameFn: vsync_frame_fn?, user: UnsafeMutableRawPointer?) {
        self.client = client
        self.id = id
        self.frameFn = frameFn
        self.user = user
    }

    var handle: OpaquePointer { OpaquePointer(Unmanaged.passUnretained(self).toOpaque()) }
}

func cString(_ s: String) -> [CChar] {
    var bytes = s.utf8.map { CChar(bitPattern: $0) }
    bytes.append(0)
    return bytes
}

func client(_ p: OpaquePointer?) -> CClient? {
    p.map { Unmanaged<CClient>.fromOpaque(UnsafeRawPointer($0)).takeUnretainedValue() }
}

func link(_ p: OpaquePointer?) -> CLink? {
    p.map { Unmanaged<CLink>.fromOpaque(UnsafeRawPointer($0)).takeUnretainedValue() }
}

/// Why the last `vsync_client_connect` failed (`vsync_client_last_error(NULL)`).
nonisolated(unsafe) var lastConnectError: [CChar] = [0]

@_cdecl("vsync_client_connect")
public func vsync_client_connect(_ path: UnsafePointer<CChar>?, _ out: UnsafeMutablePointer<OpaquePointer?>?) -> Int32 {
    guard let out else { return -ClientErrorCode.invalidArgument.rawValue }
    out.pointee = nil
    let socketPath = VsyncClient.resolvedSocketPath(path.map { String(cString: $0) })
    let core: VsyncClient
    do throws(ClientError) {
        core = try VsyncClient(VsyncClient.Configuration(socketPath: socketPath, clientName: processName()))
    } catch {
        lastConnectError = cString(error.description)
        return -error.code.rawValue
    }
    if let error = core.connect(timeoutNs: 2_000_000_000) {
        lastConnectError = cString(error.description)
        if case .connectionFailed(_, let errno) = error, errno == ETIMEDOUT { return -ClientErrorCode.timedOut.rawValue }
        return -error.code.rawValue
    }
    // Nothing a caller could want from the handshake's own events (the WELCOME).
    while core.nextEvent() != nil {}
    out.pointee = OpaquePointer(Unmanaged.passRetained(CClient(core: core)).toOpaque())
    return 0
}

/// This program's name, for the daemon's log.
func processName() -> String {
    var buffer = [CChar](repeating: 0, count: 64)
    vsync_sys_program_name(&buffer, Int32(buffer.count))
    let name = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    return name.isEmpty ? "libvsync" : name
}

@_cdecl("vsync_client_get_fd")
public func vsync_client_get_fd(_ c: OpaquePointer?) -> Int32 {
    guard let c = client(c) else { return -ClientErrorCode.invalidArgument.rawValue }
    return c.core.fileDescriptor
}

@_cdecl("vsync_client_dispatch")
public func vsync_client_dispatch(_ c: OpaquePointer?, _ timeoutMs: Int32) -> Int32 {
    // From inside a callback the events being delivered would be overtaken.
    guard let c = client(c), !c.dispatching else { return -ClientErrorCode.invalidArgument.rawValue }
    c.dispatching = true
    defer { c.dispatching = false }
    c.core.dispatch(timeoutMs: timeoutMs)
    var delivered: Int32 = 0
    while let event = c.core.nextEvent() {
        switch event {
        case .frame(let f):
            // Looked up per event: an earlier callback may have destroyed the link.
            guard let link = c.links[f.subscriptionID], let fn = link.frameFn else { continue }
            var frame = vsync_frame()
            frame.struct_size = UInt32(MemoryLayout<vsync_frame>.size)
            frame.display_id = f.displayID
            frame.sequence = f.sequence
            frame.timestamp_ns = f.timestampNs
            frame.target_timestamp_ns = f.targetTimestampNs
            frame.duration_ns = f.displayIntervalNs
            frame.skipped = f.skipped
            frame.flags = f.flags.rawValue
            frame.interval_ns = f.clientIntervalNs
            frame.received_ns = f.receivedNs
            frame.divisor = f.divisor
            frame.target_sequence = f.targetSequence
            frame.timeline_count = UInt32(f.timelines.count)
            func timeline(_ i: Int) -> vsync_frame_timeline {
                guard i < f.timelines.count else { return vsync_frame_timeline() }
                return vsync_frame_timeline(sequence: f.timelines[i].sequence, presentation_ns: f.timelines[i].presentationNs)
            }
            frame.timelines = (timeline(0), timeline(1), timeline(2), timeline(3))
            fn(link.handle, &frame, link.user)
            delivered += 1
        case .display(let id, let e):
            guard id != 0, let link = c.links[id], let fn = link.displayFn else { continue }
            let kind: Int32
            switch e.kind {
            case .modeChanged: kind = VSYNC_DISPLAY_MODE_CHANGED
            case .off: kind = VSYNC_DISPLAY_OFF
            case .on: kind = VSYNC_DISPLAY_ON
            case .added, .removed: continue
            }
            var event = vsync_display_event()
            event.struct_size = UInt32(MemoryLayout<vsync_display_event>.size)
            event.kind = UInt32(kind)
            event.display_id = e.display.displayID
            event.refresh_mhz = e.kind == .off ? 0 : e.display.refreshMillihertz
            event.period_ns = e.display.periodNs
            fn(link.handle, &event, link.user)
        case .error(let id, let error):
            c.remember(error)
            guard id != 0, let link = c.links[id], let fn = link.errorFn else { continue }
            cString(error.description).withUnsafeBufferPointer { fn(link.handle, -error.code.rawValue, $0.baseAddress, link.user) }
        case .subscribed(let answer):
            guard answer.isWaiting, let link = c.links[answer.subscriptionID], let fn = link.displayFn else { continue }
            var event = vsync_display_event()
            event.struct_size = UInt32(MemoryLayout<vsync_display_event>.size)
            event.kind = UInt32(VSYNC_DISPLAY_WAITING)
            fn(link.handle, &event, link.user)
        case .connected:
            continue
        }
    }
    return delivered
}

@_cdecl("vsync_client_last_error")
public func vsync_client_last_error(_ c: OpaquePointer?) -> UnsafePointer<CChar>? {
    guard let c = client(c) else { return lastConnectError.withUnsafeBufferPointer { $0.baseAddress } }
    return c.lastError.withUnsafeBufferPointer { $0.baseAddress }
}

@_cdecl("vsync_client_destroy")
public func vsync_client_destroy(_ c: OpaquePointer?) {
    guard let p = c else { return }
    let owner = Unmanaged<CClient>.fromOpaque(UnsafeRawPointer(p))
    owner.takeUnretainedValue().links.removeAll()
    owner.release()
}

@_cdecl("vsync_link_create")
public func vsync_link_create(_ c: OpaquePointer?, _ display: UnsafePointer<CChar>?, _ fn: vsync_frame_fn?,
                              _ user: UnsafeMutableRawPointer?) -> OpaquePointer? {
    guard let c = client(c), let selector = parseSelector(display.map { String(cString: $0) }) else { return nil }
    let id = c.core.subscribe(selector, range: .default)
    let link = CLink(client: c, id: id, frameFn: fn, user: user)
    c.links[id] = link
    return link.handle
}

/// NULL or "primary", "crtc:ID", "display:ID", or a connector name (at most 32 bytes).
func parseSelector(_ text: String?) -> DisplaySelector? {
    guard let text, !text.isEmpty, text != "primary" else { return .primary }
    for (prefix, make) in [("crtc:", DisplaySelector.crtc), ("display:", DisplaySelector.display)] where text.hasPrefix(prefix) {
        guard let id = UInt32(text.dropFirst(prefix.count)), id != 0 else { return nil }
        return make(id)
    }
    return text.utf8.count <= WireProtocol.nameSize ? .connector(text) : nil
}

@_cdecl("vsync_link_set_rate")
public func vsync_link_set_rate(_ l: OpaquePointer?, _ minimum: Double, _ maximum: Double, _ preferred: Double) -> Int32 {
    guard let l = link(l) else { return -ClientErrorCode.invalidArgument.rawValue }
    let range: FrameRateRange
    do throws(FrameRateRange.Invalid) {
        range = try FrameRateRange(minimum: Float(minimum), maximum: Float(maximum), preferred: Float(preferred))
    } catch {
        return -ClientErrorCode.invalidArgument.rawValue
    }
    l.client.core.setRange(l.id, range)
    return 0
}

@_cdecl("vsync_link_set_work_duration")
public func vsync_link_set_work_duration(_ l: OpaquePointer?, _ ns: UInt64) -> Int32 {
    guard let l = link(l), ns <= WorkDuration.maximumNs else { return -ClientErrorCode.invalidArgument.rawValue }
    l.client.core.setWorkDuration(l.id, ns)
    return 0
}

@_cdecl("vsync_link_set_predict_while_off")
public func vsync_link_set_predict_while_off(_ l: OpaquePointer?, _ on: Bool) -> Int32 {
    guard let l = link(l) else { return -ClientErrorCode.invalidArgument.rawValue }
    l.client.core.setPredictWhileOff(l.id, on)
    return 0
}

@_cdecl("vsync_link_set_paused")
public func vsync_link_set_paused(_ l: OpaquePointer?, _ paused: Bool) -> Int32 {
    guard let l = link(l) else { return -ClientErrorCode.invalidArgument.rawValue }
    l.client.core.setPaused(l.id, paused)
    return 0
}

@_cdecl("vsync_link_set_display_callback")
public func vsync_link_set_display_callback(_ l: OpaquePointer?, _ fn: vsync_display_fn?) {
    link(l)?.displayFn = fn
}

@_cdecl("vsync_link_set_error_callback")
public func vsync_link_set_error_callback(_ l: OpaquePointer?, _ fn: vsync_error_fn?) {
    link(l)?.errorFn = fn
}

@_cdecl("vsync_link_get_refresh")
public func vsync_link_get_refresh(_ l: OpaquePointer?, _ refreshMillihertz: UnsafeMutablePointer<UInt64>?,
                                   _ periodNs: UnsafeMutablePointer<UInt64>?) -> Int32 {
    guard let l = link(l) else { return -ClientErrorCode.invalidArgument.rawValue }
    let info = l.client.core.subscription(l.id)
    refreshMillihertz?.pointee = info?.display?.refreshMillihertz ?? 0
    periodNs?.pointee = info?.displayIntervalNs ?? 0
    return 0
}

@_cdecl("vsync_link_get_max_fps")
public func vsync_link_get_max_fps(_ l: OpaquePointer?) -> Int32 {
    guard let l = link(l), let info = l.client.core.subscription(l.id) else { return 0 }
    if let mhz = info.display?.refreshMillihertz, mhz > 0 { return Int32((mhz + 500) / 1000) }
    if info.displayIntervalNs > 0 { return Int32((2_000_000_000 / info.displayIntervalNs + 1) / 2) }
    return 0
}

@_cdecl("vsync_link_destroy")
public func vsync_link_destroy(_ l: OpaquePointer?) {
    guard let l = link(l) else { return }
    let owner = l.client
    owner.core.unsubscribe(l.id)
    owner.links[l.id] = nil
}

@_cdecl("vsync_strerror")
public func vsync_strerror(_ code: Int32) -> UnsafePointer<CChar>? {
    let known = ClientErrorCode(rawValue: code < 0 ? -code : code)
    let text: StaticString = known?.message ?? "unknown libvsync error code"
    return UnsafeRawPointer(text.utf8Start).assumingMemoryBound(to: CChar.self)
}

@_cdecl("vsync_now_ns")
public func vsync_now_ns() -> UInt64 { vsync_sys_now_ns() }
