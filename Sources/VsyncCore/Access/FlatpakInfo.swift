/// The app id a Flatpak (or any sandbox that follows it) writes into its sandbox's root as
/// `/.flatpak-info`, a key file whose `[Application]` group has `name=`. vsyncd reads it through
/// `/proc/PID/root/.flatpak-info`, as PipeWire does, to name a sandboxed client and to count
/// its connections per app.
public enum FlatpakInfo {
    /// Longest app id kept: Flatpak's own bound on an application id.
    public static let maxNameLength = 255

    /// `name` in `[Application]`; nil when absent, empty, too long, or not printable ASCII
    /// (the name goes into log lines, so nothing a log reader could be fooled by passes).
    public static func applicationName(in text: String) -> String? {
        var inApplication = false
        for raw in text.split(separator: "\n", omittingEmptySubsequences: true) {
            let line = raw.trimmingASCIISpaces()
            if line.hasPrefix("[") {
                inApplication = line == "[Application]"
                continue
            }
            guard inApplication, line.hasPrefix("name") else { continue }
            let rest = line.dropFirst(4).trimmingASCIISpaces()
            guard rest.hasPrefix("=") else { continue }
            let name = rest.dropFirst().trimmingASCIISpaces()
            guard !name.isEmpty, name.utf8.count <= maxNameLength,
                name.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F })
            else { return nil }
            return String(name)
        }
        return nil
    }
}

extension Substring {
    fileprivate func trimmingASCIISpaces() -> Substring {
        var s = self
        while let c = s.first, c == " " || c == "\t" || c == "\r" { s = s.dropFirst() }
        while let c = s.last, c == " " || c == "\t" || c == "\r" { s = s.dropLast() }
        return s
    }
}
