// swift-format-ignore-file: AlwaysUseLowerCamelCase
// (the C API's names, exported as they are in vsync.h)
// The link calls of the C API: create, settings, callbacks, queries, destroy.
import CVsyncABI
internal import CVsyncSys

@_cdecl("vsync_link_create")
public func vsync_link_create(
    _ c: OpaquePointer?, _ display: UnsafePointer<CChar>?, _ fn: vsync_frame_fn?,
    _ user: UnsafeMutableRawPointer?, _ out: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    out?.pointee = nil
    guard let c = client(c) else { return -ClientErrorCode.invalidArgument.rawValue }
    guard let core = c.core else { return -ClientErrorCode.notConnected.rawValue }
    guard let out else { return c.fail(.invalidArgument, "vsync_link_create: out is NULL: pass the address of a struct vsync_link *") }
    // NULL is primary; anything else is read by the one selector parser every client shares
    // (docs/PROTOCOL.md § 4: connector names, crtc:ID@CARD, display:ID, edid:MAKE/MODEL/SERIAL).
    let selector: DisplaySelector
    if let display {
        do throws(SelectorSyntaxError) {
            selector = try DisplaySelector.parse(String(cString: display))
        } catch {
            return c.fail(.invalidArgument, "vsync_link_create: \(error.message)")
        }
    } else {
        selector = .primary
    }
    let id = core.subscribe(selector, range: .default)
    let link = CLink(client: c, id: id, frameFn: fn, user: user)
    let handle = Unmanaged.passRetained(link)
    c.links[id] = handle
    out.pointee = link.handle
    return 0
}

@_cdecl("vsync_link_set_rate")
public func vsync_link_set_rate(_ l: OpaquePointer?, _ minimum: Double, _ maximum: Double, _ preferred: Double) -> Int32 {
    withLink(l) { l, core in
        let range: FrameRateRange
        do throws(FrameRateRange.Invalid) {
            range = try FrameRateRange(minimum: Float(minimum), maximum: Float(maximum), preferred: Float(preferred))
        } catch {
            return l.client.fail(.invalidArgument, "vsync_link_set_rate: \(error.description)")
        }
        core.setRange(l.id, range)
        return 0
    }
}

@_cdecl("vsync_link_set_work_duration")
public func vsync_link_set_work_duration(_ l: OpaquePointer?, _ ns: UInt64) -> Int32 {
    withLink(l) { l, core in
        guard ns <= WorkDuration.maximumNs else {
            return l.client.fail(.invalidArgument, "vsync_link_set_work_duration: \(ns) ns is over the 1 s maximum")
        }
        core.setWorkDuration(l.id, ns)
        l.workDurationNs = ns
        return 0
    }
}

@_cdecl("vsync_link_set_predict_while_off")
public func vsync_link_set_predict_while_off(_ l: OpaquePointer?, _ on: Bool) -> Int32 {
    withLink(l) { l, core in
        core.setPredictWhileOff(l.id, on)
        return 0
    }
}

@_cdecl("vsync_link_set_hardware_ticks")
public func vsync_link_set_hardware_ticks(_ l: OpaquePointer?, _ on: Bool) -> Int32 {
    withLink(l) { l, core in
        core.setHardwareTicks(l.id, on)
        return 0
    }
}

@_cdecl("vsync_link_set_paused")
public func vsync_link_set_paused(_ l: OpaquePointer?, _ paused: Bool) -> Int32 {
    withLink(l) { l, core in
        core.setPaused(l.id, paused)
        return 0
    }
}

@_cdecl("vsync_link_set_display_callback")
public func vsync_link_set_display_callback(_ l: OpaquePointer?, _ fn: vsync_display_fn?) -> Int32 {
    withLink(l) { l, _ in
        l.displayFn = fn
        return 0
    }
}

@_cdecl("vsync_link_set_error_callback")
public func vsync_link_set_error_callback(_ l: OpaquePointer?, _ fn: vsync_error_fn?) -> Int32 {
    withLink(l) { l, _ in
        l.errorFn = fn
        return 0
    }
}

@_cdecl("vsync_link_get_refresh")
public func vsync_link_get_refresh(
    _ l: OpaquePointer?, _ refreshMillihertz: UnsafeMutablePointer<UInt64>?,
    _ periodNs: UnsafeMutablePointer<UInt64>?
) -> Int32 {
    withLink(l) { l, core in
        let info = core.subscription(l.id)
        refreshMillihertz?.pointee = info?.display?.refreshMillihertz ?? 0
        periodNs?.pointee = info?.displayIntervalNs ?? 0
        return 0
    }
}

@_cdecl("vsync_link_get_max_fps")
public func vsync_link_get_max_fps(_ l: OpaquePointer?) -> Int32 {
    withLink(l) { l, core in
        guard let info = core.subscription(l.id) else { return 0 }
        if let mhz = info.display?.refreshMillihertz, mhz > 0 { return Int32((mhz + 500) / 1000) }
        if info.displayIntervalNs > 0 { return Int32((2_000_000_000 / info.displayIntervalNs + 1) / 2) }
        return 0
    }
}

@_cdecl("vsync_link_destroy")
public func vsync_link_destroy(_ l: OpaquePointer?) {
    guard let p = l else { return }
    let handle = Unmanaged<CLink>.fromOpaque(UnsafeRawPointer(p))
    let link = handle.takeUnretainedValue()
    // After the client's destroy there is nothing to unsubscribe: only the handle to free.
    if let core = link.client.core {
        core.unsubscribe(link.id)
        link.client.links[link.id] = nil
    }
    handle.release()
}
