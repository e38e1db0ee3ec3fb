import Foundation

/// The client's command line; vsync-bench writes it, so parsing is strict and minimal.
struct ClientOptions: Sendable {
    enum Mode: String, Sendable { case tick, direct, raw, connect, paused }
    var index = 0
    var mode = Mode.tick
    var fps = 0
    /// Work duration in ns: paced ticks, measured from the wake instant (target − W).
    var workNs: UInt64 = 0
    var readyFD: Int32 = 3
    var maxSeconds = 600
    /// A file with the measured window, "START END" (CLOCK_MONOTONIC ns), read at SIGUSR1: only
    /// ticks stamped inside it are recorded.
    var windowFile: String?
    var socketPath = ProcessInfo.processInfo.environment["VSYNCD_SOCKET"] ?? "/run/vsyncd/vsyncd.sock"

    static func parse(_ argv: [String]) -> ClientOptions {
        var o = ClientOptions()
        var i = 1
        func value() -> String {
            i += 1
            guard i < argv.count else { usage("\(argv[i - 1]) needs a value") }
            return argv[i]
        }
        while i < argv.count {
            switch argv[i] {
            case "--index": o.index = Int(value()) ?? 0
            case "--mode":
                let v = value()
                guard let m = Mode(rawValue: v) else { usage("unknown mode \(v)") }
                o.mode = m
            case "--fps": o.fps = Int(value()) ?? 0
            case "--work-ns": o.workNs = UInt64(value()) ?? 0
            case "--ready-fd": o.readyFD = Int32(value()) ?? 3
            case "--max-seconds": o.maxSeconds = Int(value()) ?? 600
            case "--socket": o.socketPath = value()
            case "--window-file": o.windowFile = value()
            default: usage("unknown argument \(argv[i])")
            }
            i += 1
        }
        return o
    }

    static func usage(_ why: String) -> Never {
        FileHandle.standardError.write(Data("vsync-bench-client: \(why); it is started by vsync-bench, see docs/PERFORMANCE.md\n".utf8))
        exit(64)
    }
}
