import Glibc
import VsyncClientCore
import VsyncCore

/// `follow --trace-out FILE`: the followed frames as a Perfetto trace (protobuf), written as
/// they come, so the file is whole after every tick even if the run is killed.
struct FollowTrace {
    private let fd: Int32
    private var trace: PerfettoTrace
    private var frames: PerfettoTrace.AppFrames
    private var failed = false

    init(path: String, display: String) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            throw Failure.exit("cannot write the trace to \(path): \(String(cString: strerror(errno))); give a writable --trace-out path")
        }
        self.fd = fd
        let clocks = PerfettoTrace.ClockReadings(
            monotonicNs: VBlankRecorder.now(CLOCK_MONOTONIC), boottimeNs: VBlankRecorder.now(CLOCK_BOOTTIME),
            realtimeNs: VBlankRecorder.now(CLOCK_REALTIME))
        trace = PerfettoTrace(clocks: clocks, uuidSalt: UInt64(getpid()))
        frames = PerfettoTrace.AppFrames(trace: &trace, pid: getpid(), processName: "vsync-probe", layerName: display)
        flush()
    }

    mutating func record(_ tick: FrameTick, facts: FrameFacts, jank: FrameJank) {
        frames.record(tick, facts: facts, jank: jank, into: &trace)
        flush()
    }

    /// Appends what was written since the last flush; a failed write is reported once and
    /// the trace stops there (the ticks go on).
    private mutating func flush() {
        let bytes = trace.take()
        guard !failed else { return }
        failed = !bytes.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let n = write(fd, buffer.baseAddress! + offset, buffer.count - offset)
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else {
                    Output.error("vsync-probe: warning: writing the trace failed: \(String(cString: strerror(errno))); it ends here")
                    return false
                }
                offset += n
            }
            return true
        }
    }

    func close() { _ = Glibc.close(fd) }
}
