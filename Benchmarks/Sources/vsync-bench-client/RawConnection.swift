import DisplayLink
import Foundation
import Glibc
import VsyncCore

/// A connection on a plain socket, without DisplayLink: the "connected, not subscribed" case of
/// vsync-bench --idle (a link subscribes when started), and `--mode raw`, a client shaped like
/// the C reference's (blocking recv, no threads) that isolates the daemon's share of latency.
enum RawConnection {
    enum Outcome {
        case success(Int32)
        case failure(String)
    }

    static func handshake(socketPath: String) -> Outcome {
        let fd = socket(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return .failure("socket() failed: \(String(cString: strerror(errno)))") }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let path = Array(socketPath.utf8)
        guard path.count < MemoryLayout.size(ofValue: addr.sun_path) else {
            close(fd)
            return .failure("socket path too long: \(socketPath)")
        }
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            raw.copyBytes(from: path)
            raw[path.count] = 0
        }
        // Bounded retries: the daemon may still be starting or its backlog full.
        var connected = false
        for _ in 0..<200 {
            let rc = withUnsafePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                }
            }
            if rc == 0 {
                connected = true
                break
            }
            guard errno == EAGAIN || errno == ENOENT || errno == ECONNREFUSED else { break }
            usleep(50_000)
        }
        guard connected else {
            let why = String(cString: strerror(errno))
            close(fd)
            return .failure("connect to \(socketPath) failed: \(why)")
        }
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let hello = ClientMessage.hello(
            Hello(
                minVersion: WireProtocol.minimumVersion, maxVersion: WireProtocol.currentVersion,
                clientName: "vsync-bench-client")
        ).encoded()
        guard hello.withUnsafeBytes({ send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) == hello.count else {
            close(fd)
            return .failure("sending HELLO failed: \(String(cString: strerror(errno)))")
        }
        var buffer = [UInt8](repeating: 0, count: WireProtocol.maxMessageSize)
        let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        guard n > 0 else {
            close(fd)
            return .failure("no WELCOME from vsyncd: \(n == 0 ? "closed" : String(cString: strerror(errno)))")
        }
        let message = buffer.withUnsafeBytes { try? ServerMessage.decode(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
        guard case .welcome? = message else {
            close(fd)
            return .failure("handshake refused: \(String(describing: message))")
        }
        return .success(fd)
    }
}

extension RawConnection {
    /// Subscribes at `fps` and records every tick on the calling thread, blocking in recv
    /// like the C reference's clients. Never returns; SIGUSR2 ends the process.
    static func receiveTicks(fd: Int32, fps: Int, workNs: UInt64, recorder: Recorder, ready: () -> Void) -> Never {
        var timeout = timeval(tv_sec: 0, tv_usec: 0)  // block without limit: the bench signals the end
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let subscribe = ClientMessage.subscribe(
            Subscribe(
                subscriptionID: 1, selector: .primary, range: FrameRateRange(preferredFramesPerSecond: fps),
                workDurationNs: workNs)
        ).encoded()
        _ = subscribe.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: WireProtocol.maxMessageSize, alignment: 8)
        var announced = false
        while true {
            let n = recv(fd, buffer.baseAddress, buffer.count, 0)
            let entry = DisplayLink.currentTimeNanoseconds()
            if n == 0 {
                recorder.note("vsyncd closed the connection")
                recorder.finish(exitCode: 2)
            }
            if n < 0 {
                if errno == EINTR { continue }
                recorder.note("recv failed: \(String(cString: strerror(errno)))")
                recorder.finish(exitCode: 2)
            }
            guard case .tick(let tick)? = try? ServerMessage.decode(UnsafeRawBufferPointer(rebasing: buffer[0..<n])) else { continue }
            // Paced: from the wake instant the daemon aimed at, lost frames by target sequence.
            recorder.record(
                entryNs: entry, timestampNs: workNs > 0 ? tick.targetTimestampNs &- workNs : tick.timestampNs,
                sequence: workNs > 0 ? tick.targetSequence : tick.sequence, skipped: Int(tick.skipped),
                intervalNs: tick.clientIntervalNs, durationNs: tick.displayIntervalNs)
            if !announced {
                announced = true
                ready()
            }
        }
    }
}
