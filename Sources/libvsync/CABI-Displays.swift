// swift-format-ignore-file: AlwaysUseLowerCamelCase
// (the C API's names, exported as they are in vsync.h)
// vsync_client_get_displays: the daemon's display list as struct vsync_display records.
import CVsyncABI
internal import CVsyncSys

@_cdecl("vsync_client_get_displays")
public func vsync_client_get_displays(
    _ c: OpaquePointer?, _ out: UnsafeMutableRawPointer?, _ capacity: Int,
    _ elementSize: Int
) -> Int32 {
    guard let c = client(c), let core = c.core else { return -ClientErrorCode.invalidArgument.rawValue }
    // A program built against 0.3.0's header passes its smaller struct: it gets those fields.
    let size = MemoryLayout<vsync_display>.size
    let oldest = 360  // sizeof(struct vsync_display) in 0.3.0, up to edid_serial
    guard elementSize >= oldest else {
        return c.fail(
            .invalidArgument,
            "vsync_client_get_displays: element_size \(elementSize) is below sizeof(struct vsync_display), \(oldest) in 0.3.0 and \(size) now: pass sizeof *displays"
        )
    }
    guard capacity == 0 || out != nil else {
        return c.fail(.invalidArgument, "vsync_client_get_displays: displays is NULL with capacity \(capacity)")
    }
    guard !c.dispatching else {
        return c.fail(.busy, "vsync_client_get_displays: called from inside a callback; call it after dispatch returns")
    }
    let displays: [DisplayInfo]
    do throws(ClientError) {
        displays = try core.listDisplays(timeoutNs: 2_000_000_000)
    } catch {
        c.remember(error.description)
        if case .connectionFailed(_, let errno) = error, errno == ETIMEDOUT { return -ClientErrorCode.timedOut.rawValue }
        return -error.code.rawValue
    }
    for (i, info) in displays.prefix(capacity).enumerated() {
        let element = out! + i * elementSize
        // Zero the whole element: a newer caller's fields past ours read as "unknown".
        element.initializeMemory(as: UInt8.self, repeating: 0, count: elementSize)
        var record = cDisplay(info)
        record.struct_size = UInt32(min(elementSize, size))
        withUnsafeBytes(of: &record) { element.copyMemory(from: $0.baseAddress!, byteCount: min(elementSize, size)) }
    }
    return Int32(displays.count)
}

func cDisplay(_ info: DisplayInfo) -> vsync_display {
    var d = vsync_display()
    d.struct_size = UInt32(MemoryLayout<vsync_display>.size)
    d.display_id = info.displayID
    d.crtc_id = info.crtcID
    d.connector_id = info.connectorID
    d.state = info.state == .on ? VSYNC_DISPLAY_STATE_ON : VSYNC_DISPLAY_STATE_OFF
    d.flags = info.flags.rawValue
    d.refresh_mhz = info.refreshMillihertz
    d.period_ns = info.periodNs
    d.width = UInt32(info.width)
    d.height = UInt32(info.height)
    fill(&d.name, info.connectorName)
    // The wire names the card ("card0"); DRM cards live in /dev/dri. The timer source has none.
    if info.deviceName.hasPrefix("card") { fill(&d.device_path, "/dev/dri/" + info.deviceName) }
    // Protocol 3's identity; "" from an older daemon, or where the connector has no EDID.
    fill(&d.bus_path, info.busPath)
    fill(&d.edid_make, info.edidMake)
    fill(&d.edid_model, info.edidModel)
    fill(&d.edid_serial, info.edidSerial)
    // Protocol 4's generation and timing quality; 0 from an older daemon.
    d.generation = info.generation
    d.residual_rms_ns = info.timing.rmsNs
    d.residual_p99_ns = info.timing.p99Ns
    d.residual_samples = info.timing.samples
    // Protocol 5's variable refresh range; 0 from an older daemon or a monitor without VRR.
    d.min_interval_ns = info.minIntervalNs
    d.max_interval_ns = info.maxIntervalNs
    return d
}

/// Copies `text` into a fixed C char array, NUL-terminated, cut at a UTF-8 boundary to fit.
func fill<T>(_ field: inout T, _ text: String) {
    withUnsafeMutableBytes(of: &field) { raw in
        var n = min(text.utf8.count, raw.count - 1)
        let bytes = Array(text.utf8)
        while n > 0 && n < bytes.count && bytes[n] & 0xC0 == 0x80 { n -= 1 }
        for i in 0..<n { raw[i] = bytes[i] }
        raw[n] = 0
    }
}
