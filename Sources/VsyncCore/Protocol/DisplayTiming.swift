/// A display's timing quality as the display record carries it (protocol 4): the refresh
/// model's residuals over its window. Whether the stamps are the interrupt's time is the
/// record's `DisplayFlags.interruptTimestamps`.
public struct DisplayTiming: Sendable, Equatable, Hashable {
    /// Root mean square residual, ns (saturated at u32's maximum, about 4.3 s).
    public var rmsNs: UInt32
    /// 99th percentile of |residual|, ns.
    public var p99Ns: UInt32
    /// Vblanks the residuals are over; 0: not measured (nobody followed the display since its
    /// last change, or an older daemon).
    public var samples: UInt32
    /// The largest phase difference a burst of sparse vblank sampling found between the
    /// model's prediction and the kernel's vblank since the display last sampled
    /// continuously, ns (saturated; 0 in continuous sampling). Protocol 6.
    public var phaseCorrectionNs: UInt32
    public init(rmsNs: UInt32 = 0, p99Ns: UInt32 = 0, samples: UInt32 = 0, phaseCorrectionNs: UInt32 = 0) {
        self.rmsNs = rmsNs
        self.p99Ns = p99Ns
        self.samples = samples
        self.phaseCorrectionNs = phaseCorrectionNs
    }

    public var rmsUs: Double { Double(rmsNs) / 1000 }
    public var p99Us: Double { Double(p99Ns) / 1000 }
}
