/// The refresh model's fitted line: all a prediction needs, and plain values only. A caller
/// that keeps the model in a class predicts from `model.line`: a call on the model itself
/// copies it first, with a retain and release of each of its sample buffers, every prediction.
public struct RefreshLine: Sendable, Equatable {
    /// Samples behind the line; no prediction without one.
    var count = 0
    // timestamp(seq) = refTs + offsetNs + periodNs · (seq − refSeq); ref = the newest sample.
    var refSeq: UInt64 = 0
    var refTs: UInt64 = 0
    var offsetNs = 0.0
    var periodNs: Double

    /// The fitted time of a vblank (past or future). 0 before the first sample.
    public func predictedTimestamp(forSequence sequence: UInt64) -> UInt64 {
        guard count > 0 else { return 0 }
        return offsetTimestamp(refTs, by: predictedOffset(sequence))
    }

    func predictedOffset(_ sequence: UInt64) -> Double {
        offsetNs + periodNs * signedDelta(sequence, refSeq)
    }
}

// The model's own names for its line's fields, where the fit updates them.
extension RefreshModel {
    var count: Int {
        get { line.count }
        set { line.count = newValue }
    }
    var refSeq: UInt64 {
        get { line.refSeq }
        set { line.refSeq = newValue }
    }
    var refTs: UInt64 {
        get { line.refTs }
        set { line.refTs = newValue }
    }
    var offsetNs: Double {
        get { line.offsetNs }
        set { line.offsetNs = newValue }
    }
}
