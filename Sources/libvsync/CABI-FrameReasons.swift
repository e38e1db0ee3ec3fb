// swift-format-ignore-file: AlwaysUseLowerCamelCase
// (the C API's names, exported as they are in vsync.h)
// Late frames' reasons in the C API: the app ends each frame, and VsyncCore's FrameJankTracker
// (the file FrameMonitor uses, linked here) judges it, so C and Swift apps get the same verdicts.
import CVsyncABI
internal import CVsyncSys

@_cdecl("vsync_link_frame_done")
public func vsync_link_frame_done(_ l: OpaquePointer?, _ frame: UnsafePointer<vsync_frame>?, _ workEndNs: UInt64) -> Int32 {
    // Judging needs no connection: a dead link's last frames are judged too.
    guard let l = link(l) else { return -ClientErrorCode.invalidArgument.rawValue }
    guard let frame else { return l.client.fail(.invalidArgument, "vsync_link_frame_done: frame is NULL: pass the frame the callback got") }
    let f = frame.pointee
    // Every field the rules read is in this library's frame; a smaller size is not a frame it filled.
    guard f.struct_size >= UInt32(MemoryLayout<vsync_frame>.size) else {
        return l.client.fail(
            .invalidArgument,
            "vsync_link_frame_done: frame->struct_size \(f.struct_size) is not this library's; pass the frame the callback got")
    }
    guard f.received_ns != l.lastJudgedReceivedNs else {
        return l.client.fail(.invalidArgument, "vsync_link_frame_done: this frame was already judged; call it once per frame")
    }
    let end = workEndNs == 0 ? vsync_sys_now_ns() : workEndNs
    let divisor = f.timeline_count > 1 ? f.timelines.1.sequence &- f.timelines.0.sequence : UInt64(f.divisor)
    let tick = FrameTick(
        sequence: f.sequence, timestampNs: f.timestamp_ns, targetSequence: f.target_sequence,
        targetTimestampNs: f.target_timestamp_ns, periodNs: f.duration_ns, divisor: divisor,
        workDurationNs: l.workDurationNs, flags: TickFlags(rawValue: f.flags), generation: f.generation,
        startNs: f.received_ns, endNs: end)
    let reason = l.jank.frame(tick).jank.reason
    l.reasonCounts[Int(reason.rawValue)] += 1
    l.lastJudgedReceivedNs = f.received_ns
    return Int32(reason.rawValue)
}

@_cdecl("vsync_link_get_frame_counts")
public func vsync_link_get_frame_counts(_ l: OpaquePointer?, _ out: UnsafeMutablePointer<vsync_frame_counts>?) -> Int32 {
    guard let l = link(l) else { return -ClientErrorCode.invalidArgument.rawValue }
    guard let out else { return l.client.fail(.invalidArgument, "vsync_link_get_frame_counts: out is NULL") }
    let size = MemoryLayout<vsync_frame_counts>.size
    guard out.pointee.struct_size >= UInt32(size) else {
        return l.client.fail(
            .invalidArgument,
            "vsync_link_get_frame_counts: out->struct_size \(out.pointee.struct_size) is under \(size): set it to sizeof(struct vsync_frame_counts)"
        )
    }
    var counts = vsync_frame_counts()
    counts.struct_size = UInt32(size)
    counts.reason_count = UInt32(l.reasonCounts.count)
    let onTime = l.reasonCounts[Int(FrameJankReason.onTime.rawValue)]
    counts.frames = l.reasonCounts.reduce(0, +)
    counts.late = counts.frames - onTime
    withUnsafeMutableBytes(of: &counts.by_reason) { raw in
        let slots = raw.bindMemory(to: UInt64.self)
        for (i, n) in l.reasonCounts.enumerated() where i < slots.count { slots[i] = n }
    }
    out.pointee = counts
    return 0
}

/// The reasons' names as C strings, made once from the Swift names: the one spelling.
nonisolated(unsafe) let reasonNames: [UnsafeMutablePointer<CChar>] = FrameJankReason.allCases.map { copyCString($0.name) }

@_cdecl("vsync_frame_reason_name")
public func vsync_frame_reason_name(_ reason: Int32) -> UnsafePointer<CChar>? {
    guard reason >= 0, reason < Int32(reasonNames.count) else { return nil }
    return UnsafePointer(reasonNames[Int(reason)])
}
