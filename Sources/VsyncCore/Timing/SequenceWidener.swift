/// Widens a 32-bit vblank counter (what `drmWaitVBlank` reports) to 64 bits across wraps.
///
/// Each raw value is read as the nearest 64-bit value to the newest one seen: a step of less
/// than 2³¹ forward is progress (a wrap if the low bits went down), a step of less than 2³¹
/// back is an older event (an event delivered for an earlier request), which is widened in
/// place and never counted as a wrap. At 240 Hz, 2³¹ vblanks are 103 days.
///
/// The first value seen is taken as is (so widened sequences equal the kernel's while it has
/// not wrapped, and divisor arithmetic on them matches the kernel's counter).
public struct SequenceWidener: Sendable, Hashable {
    /// The newest widened value so far; nil before the first.
    public private(set) var newest: UInt64?

    public init() {}

    /// Resumes from a widened value kept elsewhere (VsyncDRM keeps it in an atomic).
    public init(newest: UInt64?) { self.newest = newest }

    /// Widens `raw`. Older values than the newest do not move `newest`.
    /// An older value that would fall below zero (possible only just after the first value,
    /// if that one came right after a wrap) saturates at 0.
    public mutating func widen(_ raw: UInt32) -> UInt64 {
        guard let newest else {
            self.newest = UInt64(raw)
            return UInt64(raw)
        }
        let step = Int64(Int32(bitPattern: raw &- UInt32(truncatingIfNeeded: newest)))
        if step >= 0 {
            let widened = newest + UInt64(step)
            self.newest = widened
            return widened
        }
        let back = UInt64(-step)
        return back > newest ? 0 : newest - back
    }

    /// Forgets the history, e.g. when the CRTC's counter restarted.
    public mutating func reset() { newest = nil }
}
