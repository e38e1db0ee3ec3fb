import VsyncClientCore
import VsyncCore

// `vsync-probe list` reads the cards itself; what only vsyncd knows (its refresh model's timing
// quality and each display's configuration generation, protocol 4) comes from the daemon when
// one runs, and is left out when none does.
extension ListCommand {
    /// vsyncd's display records by card name and CRTC id ("card0", 40); empty without a daemon.
    static func daemonDisplays(socket: String?) -> [String: DisplayInfo] {
        let path = VsyncClient.resolvedSocketPath(socket)
        guard let client = try? VsyncClient(VsyncClient.Configuration(socketPath: path, clientName: "vsync-probe list")),
            let displays = try? client.listDisplays(timeoutNs: 1_000_000_000)
        else { return [:] }
        var byCRTC: [String: DisplayInfo] = [:]
        for d in displays where d.crtcID != 0 { byCRTC[key(card: d.deviceName, crtc: d.crtcID)] = d }
        return byCRTC
    }

    static func key(card: String, crtc: UInt32) -> String { "\(card)/\(crtc)" }

    /// Adds what vsyncd says of the CRTC to `info`: its generation always, the timing only once
    /// the model has vblanks to judge (`residual_samples` > 0).
    static func addDaemonView(_ d: DisplayInfo, to info: inout CRTCInfo) {
        info.generation = d.generation
        info.residualSamples = d.timing.samples
        info.variable = d.flags.contains(.variable)
        info.modelTimed = d.flags.contains(.modelTimed)
        if d.timing.phaseCorrectionNs > 0 { info.phaseCorrectionUs = Double(d.timing.phaseCorrectionNs) / 1000 }
        guard d.timing.samples > 0 else { return }
        info.timestampSource = (d.flags.contains(.interruptTimestamps) ? TimestampSource.interrupt : .scanout).rawValue
        info.residualUs = MeasureReport.Residual(rms: d.timing.rmsUs, p99: d.timing.p99Us)
    }

    static func daemonText(_ c: CRTCInfo) -> String {
        guard let generation = c.generation else { return "" }
        let timing =
            c.residualUs.map { r in
                ", timestamps \(c.timestampSource ?? "?"), residual RMS \(DecimalText.fixed(r.rms, places: 1)) µs, p99 \(DecimalText.fixed(r.p99, places: 1)) µs over \(c.residualSamples ?? 0) vblanks"
            } ?? ", timing not measured (nobody followed it lately)"
        let variable = c.variable == true ? ", variable refresh on" : ""
        let sampling =
            (c.modelTimed == true ? ", vblank interrupt asleep (ticks model-timed)" : "")
            + (c.phaseCorrectionUs.map { ", largest burst phase correction \(DecimalText.fixed($0, places: 1)) µs" } ?? "")
        return "; vsyncd: generation \(generation)\(variable)\(sampling)\(timing)"
    }
}
