import Foundation
import Glibc
import Testing
import VsyncCore

extension VsyncdTests {
    @Suite("vsyncd handshake and requests") struct Handshake {
        @Test func handshakeAndDisplayList() throws {
            let daemon = try DaemonProcess(hertz: 60)
            let client = try RawClient(path: daemon.socketPath)
            let welcome = try client.handshake(name: "handshake-test")
            #expect(welcome.version == 1)
            #expect(welcome.serverFlags.contains(.syntheticSource))
            #expect(welcome.serverPID == UInt32(daemon.pid))

            client.send(.listDisplays)
            guard case .message(.displayList(let displays)) = client.receive() else {
                Issue.record("no DISPLAY_LIST"); return
            }
            #expect(displays.count == 1)
            let timer = try #require(displays.first)
            #expect(timer.connectorName == "timer")
            #expect(timer.flags.contains(.synthetic) && timer.flags.contains(.primary))
            #expect(timer.state == .on)
            #expect(timer.refreshMillihertz == 60_000)
            #expect(timer.periodNs == 16_666_667)
            #expect(daemon.log.contains("client connected: pid \(getpid())"))
        }

        @Test func badVersionIsRefusedWithReason() throws {
            let daemon = try DaemonProcess()
            let client = try RawClient(path: daemon.socketPath)
            let future = WireProtocol.currentVersion + 1
            client.send(.hello(Hello(minVersion: future, maxVersion: future + 1, clientName: "future")))
            guard case .message(.refused(let refusal)) = client.receive() else {
                Issue.record("no REFUSED"); return
            }
            #expect(refusal.code == .versionUnsupported)
            #expect(refusal.message.contains("\(future)–\(future + 1)"))
            #expect(client.receive() == .closed)
        }

        @Test func requestBeforeHandshakeIsAnErrorAndDisconnects() throws {
            let daemon = try DaemonProcess()
            let early = try RawClient(path: daemon.socketPath)
            early.send(.listDisplays)
            guard case .message(.error(let e)) = early.receive() else { Issue.record("no ERROR"); return }
            #expect(e.code == .notHandshaken)
            #expect(early.receive() == .closed)

            let garbage = try RawClient(path: daemon.socketPath)
            garbage.send([0x01, 0x00, 0x30, 0x00])  // a truncated HELLO
            guard case .message(.refused(let r)) = garbage.receive() else { Issue.record("no REFUSED"); return }
            #expect(r.code == .badHandshake)
            #expect(garbage.receive() == .closed)
            #expect(daemon.log.contains("before the handshake"))
        }

        @Test func nonFatalErrorsKeepTheConnection() throws {
            let daemon = try DaemonProcess()
            let client = try RawClient(path: daemon.socketPath)
            try client.handshake()
            client.send(.pause(subscriptionID: 42))
            guard case .message(.error(let e1)) = client.receive() else { Issue.record("no ERROR"); return }
            #expect(e1.code == .unknownSubscription && e1.subscriptionID == 42)

            client.send(.subscribe(Subscribe(subscriptionID: 1, selector: .connector("HDMI-A-9"), range: .default)))
            guard case .message(.error(let e2)) = client.receive() else { Issue.record("no ERROR"); return }
            #expect(e2.code == .unknownDisplay)
            #expect(e2.message.contains("timer"))

            _ = try client.subscribe(1, fps: 0, flags: .startPaused, selector: .connector("timer"))
            client.send(.subscribe(Subscribe(subscriptionID: 1, selector: .primary, range: .default)))
            guard case .message(.error(let e3)) = client.receive() else { Issue.record("no ERROR"); return }
            #expect(e3.code == .duplicateSubscription)

            // Still connected and served.
            client.send(.listDisplays)
            guard case .message(.displayList(let list)) = client.receive() else { Issue.record("connection lost"); return }
            #expect(list.count == 1)
        }

        @Test func clientCapRefusesTheExtraClient() throws {
            let daemon = try DaemonProcess(extra: ["--max-clients", "2"])
            let a = try RawClient(path: daemon.socketPath)
            try a.handshake()
            let b = try RawClient(path: daemon.socketPath)
            try b.handshake()
            let c = try RawClient(path: daemon.socketPath)
            guard case .message(.refused(let r)) = c.receive() else { Issue.record("no REFUSED"); return }
            #expect(r.code == .tooManyClients)
            #expect(r.message.contains("2"))
            #expect(c.receive() == .closed)
            #expect(daemon.log.contains("--max-clients"))

            // A place frees up when a client leaves.
            close(a.fd)
            usleep(200_000)
            let d = try RawClient(path: daemon.socketPath)
            #expect(try d.handshake().version == 1)
        }

        @Test func sigtermExitsZeroAndClosesClients() throws {
            let daemon = try DaemonProcess()
            let client = try RawClient(path: daemon.socketPath)
            try client.handshake()
            _ = try client.subscribe(1, fps: 0)
            #expect(client.nextTick() != nil)
            #expect(daemon.stop() == 0)
            #expect(client.waitForClose())
            #expect(!FileManager.default.fileExists(atPath: daemon.socketPath))
            #expect(daemon.log.contains("stopping on SIGTERM"))
        }

        @Test func staleSocketIsReplacedButALiveDaemonIsNot() throws {
            let first = try DaemonProcess()
            let path = first.socketPath
            // A second daemon on the same path refuses to steal it.
            let second = try DaemonProcess(socketPath: path, waitForSocket: false)
            second.process.waitUntilExit()
            #expect(second.process.terminationStatus == 1)
            #expect(second.log.contains("another vsyncd is already serving \(path)"))
            // A daemon that died without cleaning up leaves a stale socket file behind...
            kill(first.pid, SIGKILL)
            first.process.waitUntilExit()
            #expect(FileManager.default.fileExists(atPath: path))
            // ...which the next daemon removes and replaces.
            let third = try DaemonProcess(socketPath: path)
            let client = try RawClient(path: path)
            #expect(try client.handshake().serverPID == UInt32(third.pid))
            var st = stat()
            #expect(stat(path, &st) == 0 && st.st_mode & 0o777 == 0o666)
        }

        @Test func missingDRMIsAClearOneLineError() throws {
            // No silent fallback to the timer: with a device that cannot be opened, vsyncd fails.
            let dir = FileManager.default.temporaryDirectory.appendingPathComponent("vsyncd-nodrm-\(getpid())")
            try? FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            let process = Process()
            process.executableURL = URL(fileURLWithPath: DaemonProcess.binaryPath)
            process.arguments = ["--source", "drm", "--device", dir.appendingPathComponent("card9").path,
                                 "--socket", dir.appendingPathComponent("s.sock").path]
            let pipe = Pipe()
            process.standardError = pipe
            try process.run()
            let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            #expect(process.terminationStatus == 1)
            let lines = output.split(separator: "\n")
            #expect(lines.count == 1)
            #expect(output.hasPrefix("vsyncd: "))
            #expect(output.contains("card9"))
            try? FileManager.default.removeItem(at: dir)
        }
    }
}
