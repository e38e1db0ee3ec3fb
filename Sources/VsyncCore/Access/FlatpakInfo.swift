/// The app id a Flatpak (or any sandbox that follows it) writes into its sandbox's root as
/// `/.flatpak-info`, a key file whose `[Application]` group has `name=`. vsyncd reads it through
/// `/proc/PID/root/.flatpak-info`, as PipeWire does, to name a sandboxed client and to count
/// its connections per app; where it may not, from the app's systemd scope.
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

    /// The app id in the name of the systemd scope Flatpak starts each app in,
    /// `app-flatpak-<ID>-<PID>.scope` (the id unit-name escaped: `-` is `\x2d`), from the text of
    /// `/proc/PID/cgroup`. A system service may not look into another user's sandbox root, but it
    /// may read the process's cgroup. Nil outside such a scope, or for an id that would not pass
    /// `applicationName(in:)`.
    public static func applicationName(inCgroup text: String) -> String? {
        let prefix = "app-flatpak-"
        let suffix = ".scope"
        for line in text.split(separator: "\n") {
            // ID:CONTROLLERS:PATH, cgroup v2's line "0::PATH" or v1's "N:name=systemd:PATH".
            let fields = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
            guard fields.count == 3, let leaf = fields[2].split(separator: "/").last,
                leaf.hasPrefix(prefix), leaf.hasSuffix(suffix)
            else { continue }
            let unit = leaf.dropFirst(prefix.count).dropLast(suffix.count)
            guard let dash = unit.lastIndex(of: "-"), unit.index(after: dash) < unit.endIndex,
                unit[unit.index(after: dash)...].utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
                let name = unescapedUnitName(unit[..<dash]), !name.isEmpty, name.utf8.count <= maxNameLength,
                name.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F })
            else { return nil }
            return name
        }
        return nil
    }

    /// systemd's unit-name escaping undone: `\xNN` is the byte NN.
    private static func unescapedUnitName(_ text: Substring) -> String? {
        var bytes: [UInt8] = []
        var rest = Array(text.utf8)[...]
        while let byte = rest.first {
            if byte == UInt8(ascii: "\\") {
                guard rest.count >= 4, rest[rest.startIndex + 1] == UInt8(ascii: "x"),
                    let value = UInt8(String(decoding: rest.dropFirst(2).prefix(2), as: UTF8.self), radix: 16)
                else { return nil }
                bytes.append(value)
                rest = rest.dropFirst(4)
            } else {
                bytes.append(byte)
                rest = rest.dropFirst()
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// File systems the kernel serves itself. A process can mount a FUSE file system in its own
    /// user namespace and stall any read of it: the daemon's one thread must never open a file
    /// there, so only these are read.
    public static let kernelServedFilesystems: Set<Substring> = [
        "tmpfs", "ramfs", "ext2", "ext3", "ext4", "xfs", "btrfs", "f2fs", "squashfs", "erofs",
    ]

    /// Whether a process's `/.flatpak-info` can be opened without a user-space file system on the
    /// way, by its `/proc/PID/mountinfo` (which the kernel answers alone): the mounts holding its
    /// `/` and `/.flatpak-info` (the topmost of each, the last listed) are kernel-served.
    public static func isSafeToRead(mountinfo text: String) -> Bool {
        var root: Substring?
        var info: Substring?
        for line in text.split(separator: "\n") {
            // ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTIONS
            let fields = line.split(separator: " ")
            guard fields.count > 4, let dash = fields.firstIndex(of: "-"), dash + 1 < fields.count else { continue }
            switch fields[4] {
            case "/": root = fields[dash + 1]
            case "/.flatpak-info": info = fields[dash + 1]
            default: break
            }
        }
        guard let root, kernelServedFilesystems.contains(root) else { return false }
        return info.map { kernelServedFilesystems.contains($0) } ?? true
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
