import Foundation
import Glibc

/// What the tests, the bench and the soak read of vsyncd through /proc.
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

    /// A thread's time runnable but not running, ns: the second field of
    /// /proc/PID/task/TID/schedstat (`thread-self` for the caller's own thread). The kernel adds
    /// each wait for a CPU when the thread gets one back, so readings taken around a missed
    /// frame show how long the thread was kept off the CPU then. Nil if unreadable.
    public static func runQueueWaitNs(_ path: String) -> UInt64? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 96)
        let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard n > 0 else { return nil }
        let fields = buffer[..<n].split(separator: UInt8(ascii: " "))
        guard fields.count >= 2 else { return nil }
        return UInt64(String(decoding: fields[1], as: UTF8.self))
    }

    /// `runQueueWaitNs` of a process's main thread.
    public static func runQueueWaitNs(pid: pid_t) -> UInt64? {
        runQueueWaitNs("/proc/\(pid)/task/\(pid)/schedstat")
    }
}
