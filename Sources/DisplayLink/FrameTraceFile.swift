import Glibc
import VsyncCore

/// A Perfetto trace file that cannot be opened.
public struct TraceFileError: Error, CustomStringConvertible {
    public let path: String
    public let errno: Int32
    public var description: String {
        "cannot write the trace to \(path): \(String(cString: strerror(errno))); give a writable path"
    }
}

/// A link's frames as a Perfetto trace file (``PerfettoTrace/AppFrames``), and its context's
/// hangs (``HangSlices``): the packets are appended after each frame or hang event, so the file
/// is whole at any moment. Used under its owner's lock only (hence unchecked).
final class FrameTraceFile: @unchecked Sendable {
    private let fd: Int32
    private var trace: PerfettoTrace
    private var frames: PerfettoTrace.AppFrames
    private var hangs = HangSlices()
    private var failed = false

    init(path: String, layerName: String) throws(TraceFileError) {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw TraceFileError(path: path, errno: Glibc.errno) }
        self.fd = fd
        let clocks = PerfettoTrace.ClockReadings(
            monotonicNs: Self.now(CLOCK_MONOTONIC), boottimeNs: Self.now(CLOCK_BOOTTIME), realtimeNs: Self.now(CLOCK_REALTIME))
        trace = PerfettoTrace(clocks: clocks, uuidSalt: UInt64(getpid()))
        let name = CommandLine.arguments.first.map { String($0.split(separator: "/").last ?? "") } ?? "app"
        frames = PerfettoTrace.AppFrames(trace: &trace, pid: getpid(), processName: name, layerName: layerName)
        flush()
    }

    deinit { close(fd) }

    func record(_ tick: FrameTick, facts: FrameFacts, jank: FrameJank) {
        frames.record(tick, facts: facts, jank: jank, into: &trace)
        flush()
    }

    func record(_ hang: HangDetector.Event) {
        hangs.record(hang, process: frames.process, into: &trace)
        flush()
    }

    /// Appends what was written since the last flush; after a failed write the file ends there.
    private func flush() {
        let bytes = trace.take()
        guard !failed else { return }
        let fd = fd
        failed = !bytes.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let n = write(fd, buffer.baseAddress! + offset, buffer.count - offset)
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else { return false }
                offset += n
            }
            return true
        }
    }

    private static func now(_ clock: clockid_t) -> UInt64 {
        var ts = timespec()
        clock_gettime(clock, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }
}
