import Foundation
import Glibc

/// What the soak watches in vsyncd through /proc (the same readings as the bad-input tests).
enum ProcReadings {
    /// Open file descriptors: the entries of /proc/PID/fd; nil if the process is gone.
    static func openFDs(_ pid: pid_t) -> Int? {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd"))?.count
    }

    /// Resident set size in KiB (VmRSS in /proc/PID/status); nil if unreadable.
    static func residentKiB(_ pid: pid_t) -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            return Int(line.dropFirst(6).split(whereSeparator: { $0 == " " || $0 == "\t" }).first ?? "")
        }
        return nil
    }
}

/// CLOCK_MONOTONIC, the clock of vsyncd's tick timestamps.
enum Monotonic {
    static var nanoseconds: UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    static var seconds: Double { Double(nanoseconds) / 1e9 }
}

/// One clear line: what failed, why, what to do.
struct SoakError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
