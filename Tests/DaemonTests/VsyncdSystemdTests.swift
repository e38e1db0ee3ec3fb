import Foundation
import Glibc
import Testing
import VsyncCore

extension VsyncdTests {
    @Suite("vsyncd systemd integration") struct Systemd {
        @Test func notifiesReadyStatusWatchdogAndStopping() throws {
            let dir = FileManager.default.temporaryDirectory.appendingPathComponent("vsyncd-notify-\(UUID().uuidString.prefix(8))")
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: dir) }
            let notifyPath = dir.appendingPathComponent("notify").path
            let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
            defer { close(fd) }
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            withUnsafeMutableBytes(of: &address.sun_path) { raw in
                for (i, b) in notifyPath.utf8.enumerated() { raw[i] = b }
            }
            let rc = withUnsafePointer(to: &address) { p in
                p.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
            try #require(rc == 0)

            func datagrams(for seconds: Double) -> [String] {
                var out: [String] = []
                let deadline = Date().addingTimeInterval(seconds)
                while Date() < deadline {
                    var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                    guard poll(&pfd, 1, 50) > 0 else { continue }
                    var buffer = [UInt8](repeating: 0, count: 4096)
                    let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                    if n > 0 { out.append(String(decoding: buffer[0..<n], as: UTF8.self)) }
                }
                return out
            }

            let daemon = try DaemonProcess(environment: ["NOTIFY_SOCKET": notifyPath, "WATCHDOG_USEC": "200000"])
            let client = try RawClient(path: daemon.socketPath)
            try client.handshake()
            let running = datagrams(for: 0.8)
            let ready = try #require(running.first)
            #expect(ready.contains("READY=1"))
            #expect(ready.contains("STATUS=1 display(s) (1 on), 0 client(s)"))
            #expect(running.contains { $0.contains("STATUS=") && $0.contains("1 client(s)") })
            // Half of 200 ms: about 8 keep-alives in 0.8 s.
            let watchdogs = running.filter { $0 == "WATCHDOG=1" }.count
            #expect(watchdogs >= 4 && watchdogs <= 12)
            #expect(daemon.stop() == 0)
            #expect(datagrams(for: 0.3).contains("STOPPING=1"))
        }

        @Test func socketActivationUsesTheInheritedSocket() throws {
            let activate = "/usr/bin/systemd-socket-activate"
            try #require(FileManager.default.isExecutableFile(atPath: activate), "install Debian package systemd")
            let dir = FileManager.default.temporaryDirectory.appendingPathComponent("vsyncd-act-\(UUID().uuidString.prefix(8))")
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: dir) }
            let path = dir.appendingPathComponent("act.sock").path
            // vsyncd's own --socket points elsewhere: it must use fd 3 instead.
            let daemon = try DaemonProcess(
                extra: [], launcher: [activate, "--seqpacket", "-l", path], waitForSocket: false)
            var client: RawClient?
            let deadline = Date().addingTimeInterval(10)
            while client == nil, Date() < deadline {
                client = try? RawClient(path: path)
                if client == nil { usleep(50_000) }
            }
            let c = try #require(client)
            #expect(try c.handshake().version == 1)
            _ = try c.subscribe(1, fps: 0)
            #expect(c.nextTick() != nil)
            #expect(daemon.log.contains("fd 3 from systemd"))
            #expect(!FileManager.default.fileExists(atPath: daemon.socketPath))
            #expect(daemon.stop() == 0)
        }
    }
}
