import VsyncCore

// A display while variable refresh (VRR) is on: no grid, so the refresh model is not fed and
// predictions are the earliest the next vblanks can be (VariableRefreshTiming).
extension Display {
    /// VRR is on and vblanks are real: ticks say `variable`.
    var isVariable: Bool { state == .on && !vblankRefused && source.variableRefresh?.isOn == true }

    /// The range as intervals; the mode's period as the shortest when the EDID has no range.
    var variableTiming: VariableRefreshTiming {
        VariableRefreshTiming(
            range: source.variableRefresh?.range,
            modePeriodNs: source.refresh?.periodNanoseconds ?? model.periodNs)
    }

    var variableRefreshFlags: DisplayFlags {
        var flags: DisplayFlags = []
        if source.variableRefresh?.capable == true { flags.insert(.variableCapable) }
        if isVariable { flags.insert(.variable) }
        return flags
    }

    /// The record's min and max interval: set while the monitor can do VRR, on or not.
    var variableRefreshIntervals: VariableRefreshTiming {
        source.variableRefresh?.capable == true ? variableTiming : VariableRefreshTiming(shortestNs: 0, longestNs: 0)
    }

    /// The interval ticks and SUBSCRIBED carry: the shortest while VRR is on (the rate the
    /// display can reach), else the model's period.
    var intervalNs: UInt64 { isVariable ? variableTiming.shortestNs : periodNs }

    /// The period pacing steps by: the shortest interval while VRR is on.
    var pacingPeriodNs: Double { isVariable ? Double(variableTiming.shortestNs) : model.periodNs }

    /// Under VRR a paced subscription gets one frame per real vblank: once it has the frame for
    /// the vblank after the newest, nothing is aimed until that vblank comes. Without a grid,
    /// aiming further would hand out frames the display may never have (when the app is slow
    /// the vblank comes later) and count the ones "passed" as skipped.
    func holdsPacing(_ pacer: FramePacer, latestSequence: UInt64) -> Bool {
        guard isVariable, pacer.target == nil, let handed = pacer.lastHandedOut else { return false }
        return handed > latestSequence
    }

    /// When vblank `sequence` is expected: while VRR is on, the earliest it can come after the
    /// newest vblank (last + k × shortest); otherwise the refresh model's prediction.
    func predictedTimestamp(forSequence sequence: UInt64) -> UInt64 {
        if isVariable, let last = model.newest {
            return variableTiming.earliest(sequence: sequence, after: last)
        }
        return model.line.predictedTimestamp(forSequence: sequence)
    }
}

extension SourceDisplay {
    /// For the log: ", variable refresh capable (48-144 Hz), on", or "" when it cannot.
    var variableRefreshText: String {
        guard let v = variableRefresh, v.capable else { return "" }
        let range = v.range.map { " (\($0.minimumHz)-\($0.maximumHz) Hz)" } ?? ""
        return ", variable refresh capable\(range)\(v.enabled ? ", on" : "")"
    }
}
