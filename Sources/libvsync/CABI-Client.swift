// swift-format-ignore-file: AlwaysUseLowerCamelCase
// (the C API's names, exported as they are in vsync.h)
// The client calls of the C API: connect, the fd, dispatch, the last error, destroy.
import CVsyncABI
internal import CVsyncSys

@_cdecl("vsync_client_connect")
public func vsync_client_connect(_ path: UnsafePointer<CChar>?, _ out: UnsafeMutablePointer<OpaquePointer?>?) -> Int32 {
    guard let out else {
        vsync_sys_set_thread_error("vsync_client_connect: out is NULL: pass the address of a struct vsync_client *")
        return -ClientErrorCode.invalidArgument.rawValue
    }
    out.pointee = nil
    let socketPath = VsyncClient.resolvedSocketPath(path.map { String(cString: $0) })
    let core: VsyncClient
    do throws(ClientError) {
        core = try VsyncClient(VsyncClient.Configuration(socketPath: socketPath, clientName: processName()))
    } catch {
        vsync_sys_set_thread_error(error.description)
        return -error.code.rawValue
    }
    if let error = core.connect(timeoutNs: 2_000_000_000) {
        vsync_sys_set_thread_error(error.description)
        if case .connectionFailed(_, let errno) = error, errno == ETIMEDOUT { return -ClientErrorCode.timedOut.rawValue }
        return -error.code.rawValue
    }
    // Nothing a caller could want from the handshake's own events (the WELCOME).
    while core.nextEvent() != nil {}
    vsync_sys_set_thread_error("")
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
    guard let c = client(c), let core = c.core else { return -ClientErrorCode.invalidArgument.rawValue }
    return core.fileDescriptor
}

@_cdecl("vsync_client_dispatch")
public func vsync_client_dispatch(_ c: OpaquePointer?, _ timeoutMs: Int32) -> Int32 {
    guard let c = client(c), let core = c.core else { return -ClientErrorCode.invalidArgument.rawValue }
    // From inside a callback the events being delivered would be overtaken.
    guard !c.dispatching else {
        return c.fail(.busy, "vsync_client_dispatch: called from inside a callback; return from it first")
    }
    c.dispatching = true
    defer { c.dispatching = false }
    core.dispatch(timeoutMs: timeoutMs)
    var delivered: Int32 = 0
    // `c` and `core` are held for the loop: a callback may destroy its link, or even the client
    // (then the loop ends after it).
    while c.core != nil, let event = core.nextEvent() {
        switch event {
        case .frame(let f):
            // Looked up per event: an earlier callback may have destroyed the link.
            guard let link = c.links[f.subscriptionID]?.takeUnretainedValue(), let fn = link.frameFn else { continue }
            var frame = cFrame(f)
            fn(link.handle, &frame, link.user)
            delivered += 1
        case .display(let id, let e):
            guard id != 0, let link = c.links[id]?.takeUnretainedValue(), let fn = link.displayFn else { continue }
            let kind: Int32
            switch e.kind {
            case .modeChanged: kind = VSYNC_DISPLAY_MODE_CHANGED
            case .off: kind = VSYNC_DISPLAY_OFF
            case .on: kind = VSYNC_DISPLAY_ON
            case .variableRefreshChanged: kind = VSYNC_DISPLAY_VARIABLE_REFRESH_CHANGED
            case .added, .removed: continue
            }
            var event = vsync_display_event()
            event.struct_size = UInt32(MemoryLayout<vsync_display_event>.size)
            event.kind = UInt32(kind)
            event.display_id = e.display.displayID
            event.refresh_mhz = e.kind == .off ? 0 : e.display.refreshMillihertz
            event.period_ns = e.display.periodNs
            event.generation = e.display.generation
            event.flags = e.display.flags.rawValue
            event.min_interval_ns = e.display.minIntervalNs
            event.max_interval_ns = e.display.maxIntervalNs
            event.monotonic_ns = e.display.clock?.monotonicNs ?? 0
            event.realtime_ns = e.display.clock?.realtimeNs ?? 0
            fn(link.handle, &event, link.user)
        case .error(let id, let error):
            c.remember(error.description)
            guard id != 0, let link = c.links[id]?.takeUnretainedValue(), let fn = link.errorFn else { continue }
            cString(error.description).withUnsafeBufferPointer { fn(link.handle, -error.code.rawValue, $0.baseAddress, link.user) }
        case .subscribed(let answer):
            guard answer.isWaiting, let link = c.links[answer.subscriptionID]?.takeUnretainedValue(),
                let fn = link.displayFn
            else { continue }
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

func cFrame(_ f: ClientFrame) -> vsync_frame {
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
    frame.generation = f.generation
    return frame
}

@_cdecl("vsync_client_last_error")
public func vsync_client_last_error(_ c: OpaquePointer?) -> UnsafePointer<CChar>? {
    guard let c = client(c) else { return UnsafePointer(vsync_sys_thread_error()) }
    return UnsafePointer(c.lastError)
}

@_cdecl("vsync_client_destroy")
public func vsync_client_destroy(_ c: OpaquePointer?) {
    guard let p = c else { return }
    let owner = Unmanaged<CClient>.fromOpaque(UnsafeRawPointer(p))
    let client = owner.takeUnretainedValue()
    // Closes the fds now; links still alive keep the (closed) client object until they go.
    client.links.removeAll()
    client.core = nil
    owner.release()
}
