/// The old mode's last vblanks after the CRTC already reads the new mode.
///
/// An atomic mode set swaps the CRTC's state in before its commit reaches the hardware, so a
/// read of the CRTC may report the new mode while scanout, and its vblanks, still run on the
/// old one: for a frame or two on hardware, for up to 0.6 s in a guest whose commit worker is
/// descheduled. Fed to the new mode's model those vblanks teach it the old period (and tick
/// with it after the new one was announced); judged against the new period they are outliers
/// that use up the daemon's re-reads of the CRTC. So until a vblank leaves the old grid, the
/// vblanks on it are the old mode's tail: neither ticked nor learned.
///
/// A vblank belongs to the tail when its sequence follows the tail's newest and it lands on
/// the old grid from there (whole old periods, within `toleranceFraction` of one), nearer it
/// than new periods would; after a gap of more than `phaseFrames` (events were asleep), when
/// its count says old periods went by. The first that does not ends the tail for good; so does
/// one `longestNs` after the read, in case the read mode is not what scans out. A mode that
/// cannot be told apart from the old one by its period starts no tail at all.
///
/// Pure: the daemon feeds it vblanks.
public struct ModeSetTail: Sendable, Equatable {
    public let oldPeriodNs: Double
    public let newPeriodNs: Double
    /// The newest vblank on the old grid: the last before the read, then each one held.
    public private(set) var sequence: UInt64
    public private(set) var timestampNs: UInt64
    /// Vblanks held so far.
    public private(set) var held = 0
    /// When the new mode was read (CLOCK_MONOTONIC, as the kernel's vblank timestamps).
    private let readNs: UInt64

    /// How far off the old grid a vblank may land and still be on it, as a share of the period.
    public static let toleranceFraction = 0.02
    /// Up to this many frames from the tail's newest, a vblank must land on the old grid; after
    /// more, its count must say old periods went by, within `rateFraction` of one each.
    public static let phaseFrames = 4.0
    public static let rateFraction = 0.005
    /// The longest tail believed (a guest's commit worker was measured 0.6 s late).
    public static let longestNs: UInt64 = 1_000_000_000

    /// Nil when the periods are within twice the tolerance of each other: a vblank cannot tell
    /// which mode it belongs to.
    public init?(oldPeriodNs: Double, newPeriodNs: Double, lastSequence: UInt64, lastTimestampNs: UInt64, readNs: UInt64) {
        guard oldPeriodNs > 0, newPeriodNs > 0, oldPeriodNs.isFinite, newPeriodNs.isFinite,
            abs(oldPeriodNs - newPeriodNs) > 2 * Self.toleranceFraction * newPeriodNs
        else { return nil }
        self.oldPeriodNs = oldPeriodNs
        self.newPeriodNs = newPeriodNs
        sequence = lastSequence
        timestampNs = lastTimestampNs
        self.readNs = readNs
    }

    /// True if the vblank is the old mode's (it becomes the tail's newest); false if the tail
    /// is over, from this vblank on.
    public mutating func holds(sequence: UInt64, timestampNs: UInt64) -> Bool {
        guard sequence > self.sequence, timestampNs > self.timestampNs, timestampNs <= readNs &+ Self.longestNs else { return false }
        let frames = Double(sequence - self.sequence)
        let elapsed = Double(timestampNs - self.timestampNs)
        let offOld = abs(elapsed - frames * oldPeriodNs)
        guard offOld < abs(elapsed - frames * newPeriodNs) else { return false }
        if frames <= Self.phaseFrames {
            guard offOld <= Self.toleranceFraction * oldPeriodNs else { return false }
        } else {
            // A driver that restarts its vblank timer on enable has moved the phase across the
            // gap; the count it gives for the gap still says which mode's frames went by.
            guard offOld <= Self.rateFraction * oldPeriodNs * frames else { return false }
        }
        self.sequence = sequence
        self.timestampNs = timestampNs
        held += 1
        return true
    }
}
