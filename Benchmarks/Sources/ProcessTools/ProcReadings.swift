import Foundation
import Glibc

/// What the bench and the soak read of vsyncd through /proc.
public enum ProcReadings {
    /// Open file descriptors: the entries of /proc/PID/fd; nil if the process is gone.
    public static func openFDs(_ pid: pid_t) -> Int? {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd"))?.count
    }

    /// Resident set size in KiB (VmRSS in /proc/PID/status); nil if unreadable.
    public static func residentKiB(_ pid: pid_t) -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            return Int(line.dropFirst(6).split(whereSeparator: { $0 == " " || $0 == "\t" }).first ?? "")
        }
        return nil
    }
}
