import Foundation

/// One CRTC of one card, as the recorder names it: CRTC object ids repeat across cards.
struct KernelCRTC: Hashable, CustomStringConvertible {
    /// The node's name, e.g. "card1".
    var card: String
    var crtc: UInt32
    var description: String { "\(card) CRTC \(crtc)" }
}

/// The kernel's own record of every vblank of a CRTC, taken in the guest beside vsyncd by
/// Tests/vm-tools/kernel-vblank-recorder.c (drmCrtcQueueSequence; it retries while the CRTC is
/// off). Independent of vsyncd: the truth the VM tests match vsyncd's ticks against, by sequence
/// (and, with several CRTCs recorded at once, by card and CRTC: see `KernelRecord.byCRTC`).
struct KernelRecord {
    /// Sequence → the kernel's timestamp.
    var timestamps: [UInt64: UInt64] = [:]
    /// In the order recorded, each sequence once.
    var ordered: [(sequence: UInt64, timestampNs: UInt64)] = []
    /// Sequence → when the recorder read the event (CLOCK_MONOTONIC), the first time.
    var receivedNs: [UInt64: UInt64] = [:]

    /// The lines the recorder printed: "<sequence> <ns> <received ns>".
    init(_ lines: [String]) {
        for line in lines {
            let parts = line.split(separator: " ")
            guard parts.count == 2 || parts.count == 3, let seq = UInt64(parts[0]), let ns = UInt64(parts[1]) else { continue }
            if timestamps[seq] == nil {
                ordered.append((seq, ns))
                if parts.count == 3 { receivedNs[seq] = UInt64(parts[2]) }
            }
            timestamps[seq] = ns
        }
    }

    /// The recorder's `--watch` lines, "<card> <crtc> <sequence> <ns> <received ns>", one record
    /// per CRTC.
    static func byCRTC(_ lines: [String]) -> [KernelCRTC: KernelRecord] {
        var grouped: [KernelCRTC: [String]] = [:]
        for line in lines {
            let parts = line.split(separator: " ")
            guard parts.count == 4 || parts.count == 5, let crtc = UInt32(parts[1]) else { continue }
            grouped[KernelCRTC(card: String(parts[0]), crtc: crtc), default: []].append(parts[2...].joined(separator: " "))
        }
        return grouped.mapValues(KernelRecord.init)
    }

    /// What the record holds after `ns`, for a failure's message: how many vblanks, and the first
    /// few as sequence and interval.
    func tail(after ns: UInt64) -> String {
        let rest = ordered.filter { $0.timestampNs > ns }
        var previous = ns
        let first = rest.prefix(8).map { sample in
            defer { previous = sample.timestampNs }
            return "\(sample.sequence) +\(String(format: "%.3f", Double(sample.timestampNs &- previous) / 1e6)) ms"
        }
        return "the record after that: \(rest.count) vblanks" + (first.isEmpty ? "" : " (\(first.joined(separator: ", ")), …)")
    }

    /// How long the guest kept the recorder, a minimal reader of these events, from reading
    /// them during `from...to`: the largest (read − vblank) of the vblanks in it, counted up to
    /// `to`. The guest's own stalls (TCG on a loaded host, the kernel's own work) hold up every
    /// process in it; a client's delays beyond this are its own and the daemon's.
    func readerHeldUpNs(from: UInt64, to: UInt64) -> UInt64 {
        var worst: UInt64 = 0
        for (sequence, ns) in ordered where ns >= from && ns <= to {
            if let read = receivedNs[sequence], min(read, to) > ns { worst = max(worst, min(read, to) - ns) }
        }
        return worst
    }

    /// Whether the kernel's own count jumped over `sequence`: the record has vblanks on both
    /// sides of it but no event with it. (The vblank timer of Linux 7.x's vkms counts every period
    /// that passed when it fires late, so a count can go by with no event of its own.)
    func countJumpsOver(_ sequence: UInt64) -> Bool {
        timestamps[sequence] == nil && zip(ordered, ordered.dropFirst()).contains { $0.sequence < sequence && sequence < $1.sequence }
    }

    /// Pauses in the record longer than `ns`: the CRTC was off, or a mode set.
    func gaps(longerThan ns: UInt64) -> [(before: (sequence: UInt64, timestampNs: UInt64), after: (sequence: UInt64, timestampNs: UInt64))] {
        zip(ordered, ordered.dropFirst()).filter { $1.timestampNs - $0.timestampNs > ns }.map { ($0, $1) }
    }

    /// Builds the recorder on the host (the guest runs the host's files), once per test run.
    static func recorderPath() throws -> String { try vmToolPath("kernel-vblank-recorder") }

    /// Builds Tests/vm-tools/NAME.c on the host with libdrm into .build/vm-tools/NAME.
    static func vmToolPath(_ name: String) throws -> String {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
        let out = root.appendingPathComponent(".build/vm-tools")
        try FileManager.default.createDirectory(at: out, withIntermediateDirectories: true)
        let binary = out.appendingPathComponent(name).path
        let source = root.appendingPathComponent("Tests/vm-tools/\(name).c").path
        let cc = Process()
        cc.executableURL = URL(fileURLWithPath: "/usr/bin/cc")
        cc.arguments = ["-O2", "-Wall", "-Werror", "-I/usr/include/libdrm", source, "-ldrm", "-o", binary]
        try cc.run()
        cc.waitUntilExit()
        guard cc.terminationStatus == 0 else { throw VsyncdVMError("cc \(source) failed (is libdrm-dev installed?)") }
        return binary
    }
}

extension VsyncdGuestScript {
    /// Starts the kernel recorder in the guest as client NAME: `stop NAME` ends it, `dump` prints
    /// its lines as `@@NAME <sequence> <ns>`; read them with `KernelRecord(out.all(NAME))`.
    mutating func recordKernel(_ name: String) throws {
        shell("KVR='\(try KernelRecord.recorderPath())'")
        shell(#""$KVR" >/tmp/c.\#(name).out 2>/tmp/c.\#(name).err & PID_\#(name)=$!; CLIENTS="${CLIENTS:-} \#(name)""#)
    }
}

extension VsyncdGuestScript {
    /// Starts the kernel recorder as client NAME on every display of the vkms layout
    /// (Tests/TestBed/vkms-layout.sh show), or on `only` those displays (e.g. ["vkms.1"]: not on a card
    /// the test removes): read it with `KernelRecord.byCRTC(out.all(NAME))`.
    mutating func recordKernelOnLayout(_ name: String, only: [String]? = nil) throws {
        shell("KVR='\(try KernelRecord.recorderPath())'")
        let pick = only.map { " && index(\"\($0.map { " \($0) " }.joined())\", \" \" $1 \" \")" } ?? ""
        shell(#"set -- $(Tests/TestBed/vkms-layout.sh show | awk '$4 != "-"\#(pick) { printf "--watch %s:%s ", $2, $4 }')"#)
        shell(#""$KVR" "$@" >/tmp/c.\#(name).out 2>/tmp/c.\#(name).err & PID_\#(name)=$!; CLIENTS="${CLIENTS:-} \#(name)"; set --"#)
    }
}

extension VsyncdGuestOutput {
    /// The vblank method vsyncd said it uses ("crtc-sequence" or "wait-vblank"), from its log.
    var vblankMethod: String? {
        for line in log {
            for method in ["crtc-sequence", "wait-vblank"] where line.contains("opened ") && line.contains(method) { return method }
        }
        return nil
    }
}
