import Glibc

/// Tells vsync-bench this client is live: "I\n" on the inherited ready fd (one short write, so
/// lines from many clients on one pipe never interleave).
enum ReadyPipe {
    static func announce(_ options: ClientOptions) {
        let line = Array("\(options.index)\n".utf8)
        _ = line.withUnsafeBytes { write(options.readyFD, $0.baseAddress, $0.count) }
    }
}
