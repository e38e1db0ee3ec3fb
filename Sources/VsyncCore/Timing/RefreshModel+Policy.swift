// What RefreshModel says of a sample, and the numbers its policy runs on.

extension RefreshModel {
    public enum Verdict: Sendable, Hashable {
        /// Added to the fit.
        case accepted
        /// Rejected: too far from the prediction. Counted in `outlierCount`.
        case outlier
        /// The model started over from this sample (and possibly the rejected ones before it).
        case restarted
        /// The newest vblank seen again (accepted or not): the same sequence, or a timestamp
        /// within `minimumIntervalNs` of it. Ignored. The kernel flushes pending events when a
        /// CRTC goes off or changes mode, carrying the last count and time again.
        case duplicate
        /// Older than the newest sample seen (an event for an earlier request): ignored.
        case stale
    }

    /// Samples needed before the least-squares fit replaces the prior period (Android: 6).
    public static let minimumSamplesForFit = 6
    /// Residual, as a fraction of the period, beyond which a sample is an outlier (Android: 20 %).
    public static let outlierFraction = 0.2
    /// Consecutive agreeing outliers that make the model restart.
    public static let restartRun = 6
    /// No display refreshes faster than this: a sample closer than it to the newest one seen is
    /// that vblank again (a flushed event), whatever its sequence says.
    public static let minimumIntervalNs: UInt64 = 250_000
    /// A gap longer than this (in time, or in sequence × period), and longer than 30 periods,
    /// lets a rejected sample restart the phase at once.
    public static let longGapNs = 1e9

    /// How far a fitted period may lie from the known one (the mode's, or one a restart found)
    /// and be taken: a display keeps its mode's period to its pixel clock's tolerance (VESA:
    /// ±0.5 %), while six interrupt stamps on a 4 ms timer tick fit a line 4 % fast. Another
    /// mode's period shows as a run of outliers and a restart; a nearer change is the daemon's
    /// re-read of the mode to find.
    public static let periodAgreement = 0.01

    /// Samples needed before the residuals' spread can say how the timestamps were taken.
    public static let minimumSamplesForSpread = 24
    /// The residuals say "interrupt time" when their RMS is at least this and their skewness
    /// (late tail) at least `interruptSkewness`; they say "scanout" again below half of either.
    /// Scanout stamps are within a few µs; interrupt latency is hundreds of µs, always late.
    public static let interruptSpreadNs = 10_000.0
    public static let interruptSkewness = 1.0
    /// A spread no scanout stamp has, whatever its shape: the kernel takes a scanout stamp
    /// from a scanout-position query it retries until the query took under
    /// `drm.timestamp_precision_usec` (20 µs by default), so its error is bounded by that.
    /// Interrupt stamps in the test bed with high-resolution timers spread 40–60 µs RMS on an
    /// idle host, not always with a late tail: a spread this wide says interrupt by itself.
    public static let interruptOnlySpreadNs = 25_000.0
}
