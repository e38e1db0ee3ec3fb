// swift-format-ignore-file: AlwaysUseLowerCamelCase
// (the C API's names, exported as they are in vsync.h)
// The timing page's calls of the C API (protocol 5): a display's timing read from the shared
// page with no syscall, and page-only links that keep a display's record current without frames.
import CVsyncABI
internal import CVsyncSys

@_cdecl("vsync_display_timing")
public func vsync_display_timing(
    _ c: OpaquePointer?, _ displayID: UInt32, _ afterNs: UInt64,
    _ out: UnsafeMutablePointer<vsync_display_timing>?
) -> Int32 {
    // No error line is recorded on this path: it may run on any thread while another dispatches,
    // and the line is the client's one-thread state. The codes say it all (vsync_strerror).
    guard let c = client(c), let core = c.core, let out else { return -ClientErrorCode.invalidArgument.rawValue }
    let timing: VBlankTiming
    do throws(TimingPageError) {
        timing = try core.timingPage.timing(displayID: displayID)
    } catch {
        return -error.errno
    }
    var t = vsync_display_timing()
    t.struct_size = UInt32(MemoryLayout<vsync_display_timing>.size)
    t.display_id = timing.displayID
    t.generation = timing.generation
    t.flags = timing.flags
    t.last_sequence = timing.lastSequence
    t.last_timestamp_ns = timing.lastTimestampNs
    t.anchor_sequence = timing.anchorSequence
    t.anchor_ns = timing.anchorNs
    t.period_ns = timing.periodWholeNs
    t.period_frac = timing.periodFraction
    t.period = timing.periodNs
    t.refresh_mhz = timing.refreshMillihertz
    t.min_interval_ns = timing.minimumIntervalNs
    t.max_interval_ns = timing.maximumIntervalNs
    t.updated_ns = timing.updatedNs
    // clock_gettime(CLOCK_MONOTONIC) is the vDSO's: no syscall either.
    if let next = timing.nextVBlank(after: afterNs == 0 ? vsync_sys_now_ns() : afterNs) {
        t.next_sequence = next.sequence
        t.next_ns = next.timestampNs
    }
    out.pointee = t
    return 0
}

@_cdecl("vsync_link_set_page_only")
public func vsync_link_set_page_only(_ l: OpaquePointer?, _ pageOnly: Bool) -> Int32 {
    withLink(l) { l, core in
        core.setPageOnly(l.id, pageOnly)
        return 0
    }
}
