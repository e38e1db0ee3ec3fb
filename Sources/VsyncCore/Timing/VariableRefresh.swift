/// What a display says of variable refresh (VRR, FreeSync, Adaptive-Sync), read without DRM
/// master: the connector's `vrr_capable`, the CRTC's `VRR_ENABLED` and the EDID's range.
public struct VariableRefreshState: Sendable, Hashable {
    /// The connector's `vrr_capable` is 1 (false when the driver has no such property).
    public var capable: Bool
    /// The CRTC's `VRR_ENABLED` is 1 (set by the compositor; no uevent when it changes).
    public var enabled: Bool
    /// The EDID's display range limits, when it has them.
    public var range: EDIDRefreshRange?

    public init(capable: Bool, enabled: Bool, range: EDIDRefreshRange? = nil) {
        self.capable = capable
        self.enabled = enabled
        self.range = range
    }

    /// Vblanks vary: the monitor can and the compositor turned it on.
    public var isOn: Bool { capable && enabled }
}

/// Frame timing while variable refresh is on. There is no grid: a vblank comes when the app's
/// frame is ready, anywhere from the shortest interval after the last one to the longest. So
/// predictions are the earliest a vblank can be (VK_EXT_present_timing's view of a variable
/// display: refreshDuration = the shortest interval, refreshInterval unknown), and the refresh
/// model is not fed (its varying intervals are not mode changes nor period restarts).
public struct VariableRefreshTiming: Sendable, Equatable {
    /// 1 / the range's maximum rate, but never under the mode's period: VRR only stretches the
    /// vertical front porch, so no frame is shorter than the mode's.
    public var shortestNs: UInt64
    /// 1 / the range's minimum rate; 0 when the EDID gave no range.
    public var longestNs: UInt64

    public init(range: EDIDRefreshRange?, modePeriodNs: Double) {
        let mode = UInt64(max(0, modePeriodNs).rounded())
        let shortest = max(range?.shortestIntervalNs ?? 0, mode)
        shortestNs = shortest
        longestNs = range.map { max($0.longestIntervalNs, shortest) } ?? 0
    }

    public init(shortestNs: UInt64, longestNs: UInt64) {
        self.shortestNs = shortestNs
        self.longestNs = longestNs
    }

    /// The earliest vblank `sequence` can be, from the newest vblank seen: k frames after it
    /// come no sooner than k shortest intervals.
    public func earliest(sequence: UInt64, after last: (sequence: UInt64, timestampNs: UInt64)) -> UInt64 {
        guard sequence > last.sequence else { return last.timestampNs }
        return last.timestampNs &+ (sequence &- last.sequence) &* shortestNs
    }
}
