import Foundation
import Glibc
import Testing
import VsyncCore

extension VsyncdTests {
    @Suite("vsyncd ticks and rates") struct Ticks {
        @Test func ratesAreDeliveredOnDivisorSequences() throws {
            let daemon = try DaemonProcess(hertz: 60)
            let half = try RawClient(path: daemon.socketPath)
            try half.handshake(name: "half")
            let full = try RawClient(path: daemon.socketPath)
            try full.handshake(name: "full")
            let s30 = try half.subscribe(1, fps: 30)
            let s60 = try full.subscribe(7, fps: 0)
            #expect(s30.divisor == 2)
            #expect(s60.divisor == 1)
            #expect(s30.clientIntervalNs == 2 * s30.displayIntervalNs)

            var halfTicks: [Tick] = []
            var latenciesUs: [Double] = []
            for _ in 0..<20 {
                guard let t = half.nextTick() else { break }
                latenciesUs.append(Double(Int64(monotonicNowNs()) - Int64(t.timestampNs)) / 1000)
                halfTicks.append(t)
            }
            let fullTicks = full.drain().compactMap { if case .tick(let t) = $0 { t } else { nil } }
            #expect(halfTicks.count == 20)
            let period = 1e9 / 60
            for t in halfTicks {
                #expect(t.sequence % 2 == 0)
                #expect(t.subscriptionID == 1 && t.divisor == 2 && t.flags == .synthetic)
                #expect(t.displayIntervalNs == 16_666_667)
                #expect(t.clientIntervalNs == 33_333_334)
                // The timer's vblank n is at epoch + n·period, so the target is exact to the ns.
                #expect(abs(Double(t.targetTimestampNs) - Double(t.timestampNs) - 2 * period) < 2)
            }
            // Consecutive ticks are 2 vblanks apart; on a loaded machine the test may fall behind,
            // and then every missing tick must be counted in `skipped`.
            for (a, b) in zip(halfTicks, halfTicks.dropFirst()) {
                let gap = b.sequence - a.sequence
                #expect(gap % 2 == 0 && gap / 2 - 1 == UInt64(b.skipped))
                #expect(abs(Double(b.timestampNs - a.timestampNs) - Double(gap) * period) < 2)
            }
            #expect(halfTicks.filter { $0.skipped == 0 }.count >= 15)
            // Both clients tick on the same vblanks.
            // (The full-rate client was not read meanwhile: its socket filled and its ticks were
            // coalesced, so every gap must be counted in `skipped`.)
            let fullSequences = Set(fullTicks.map(\.sequence))
            #expect(fullTicks.count >= 15)
            #expect(halfTicks.filter { fullSequences.contains($0.sequence) }.count >= 5)
            for (a, b) in zip(fullTicks, fullTicks.dropFirst()) {
                #expect(b.sequence - a.sequence - 1 == UInt64(b.skipped))
            }

            latenciesUs.sort()
            let median = latenciesUs[latenciesUs.count / 2]
            print("tick latency timer:60, 2 clients: median \(median) µs, max \(latenciesUs.last ?? 0) µs")
            #expect(median < 5_000)
        }

        @Test func setRateChangesTheDivisor() throws {
            let daemon = try DaemonProcess(hertz: 60)
            let client = try RawClient(path: daemon.socketPath)
            try client.handshake()
            _ = try client.subscribe(3, fps: 0)
            client.send(.setRate(SetRate(subscriptionID: 3, range: try FrameRateRange(minimum: 10, maximum: 25, preferred: 0))))
            var answer: Subscribed?
            for _ in 0..<20 {
                if case .message(.subscribed(let s)) = client.receive() { answer = s; break }
            }
            #expect(answer?.divisor == 3)
            _ = client.drain()
            var ticks: [Tick] = []
            while ticks.count < 6, let t = client.nextTick() { ticks.append(t) }
            #expect(ticks.count == 6)
            #expect(ticks.allSatisfy { $0.sequence % 3 == 0 && $0.divisor == 3 })
        }

        @Test func pauseStopsTicksAndResumeRestartsThem() throws {
            let daemon = try DaemonProcess(hertz: 60)
            let client = try RawClient(path: daemon.socketPath)
            try client.handshake()
            _ = try client.subscribe(1, fps: 0, flags: .startPaused)
            #expect(client.nextTick(timeout: 0.3) == nil)

            client.send(.resume(subscriptionID: 1))
            #expect(client.nextTick() != nil)

            client.send(.pause(subscriptionID: 1))
            usleep(100_000)
            _ = client.drain()  // ticks sent before the pause arrived
            #expect(client.nextTick(timeout: 0.4) == nil)

            client.send(.resume(subscriptionID: 1))
            let first = client.nextTick()
            #expect(first != nil)
            #expect(first?.skipped == 0)  // ticks not sent while paused are not "skipped"
        }

        @Test func idleDaemonMakesNoWakeUps() throws {
            let daemon = try DaemonProcess(hertz: 240)
            let client = try RawClient(path: daemon.socketPath)
            try client.handshake()
            _ = try client.subscribe(1, fps: 0)
            #expect(client.nextTick() != nil)
            let busy1 = contextSwitches(daemon.pid)
            usleep(500_000)
            let busy = contextSwitches(daemon.pid) - busy1
            client.send(.unsubscribe(subscriptionID: 1))
            usleep(300_000)
            let idle1 = contextSwitches(daemon.pid)
            usleep(1_000_000)
            let idle = contextSwitches(daemon.pid) - idle1
            print("vsyncd context switches: \(busy) in 0.5 s at 240 Hz with a subscriber, \(idle) in 1 s idle")
            #expect(busy >= 60)
            #expect(idle <= 2)
        }

        /// A real separate client process (Python, speaking the protocol from docs/PROTOCOL.md).
        @Test func separateClientProcess() throws {
            let daemon = try DaemonProcess(hertz: 60)
            let script = """
                import socket, struct, sys
                s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
                s.connect(sys.argv[1])
                s.send(struct.pack("<HHIIHH32s", 1, 48, 0, 0x4E595356, 1, 1, b"python"))
                t, = struct.unpack_from("<H", s.recv(4096))
                assert t == 0x101, t
                s.send(struct.pack("<HHIIIBxxxI32sfff", 3, 68, 0, 5, 0, 2, 0, b"timer", 0, 0, 20))
                seqs = []
                while len(seqs) < 5:
                    m = s.recv(4096)
                    t, = struct.unpack_from("<H", m)
                    if t == 0x105:
                        sub, disp, seq = struct.unpack_from("<IIQ", m, 8)
                        div, = struct.unpack_from("<I", m, 60)
                        seqs.append((seq, div))
                print(" ".join("%d/%d" % x for x in seqs))
                """
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["python3", "-c", script, daemon.socketPath]
            let pipe = Pipe()
            process.standardOutput = pipe
            try process.run()
            let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            #expect(process.terminationStatus == 0)
            let pairs = output.split(whereSeparator: \.isWhitespace).map { $0.split(separator: "/").compactMap { UInt64($0) } }
            #expect(pairs.count == 5)
            for p in pairs where p.count == 2 {
                #expect(p[1] == 3)
                #expect(p[0] % 3 == 0)
            }
        }
    }
}

/// Voluntary + involuntary context switches of every thread of `pid`: one per wake-up.
func contextSwitches(_ pid: Int32) -> Int {
    let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
    var total = 0
    for task in tasks {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/status", encoding: .utf8) else { continue }
        for line in status.split(separator: "\n") where line.contains("ctxt_switches") {
            total += Int(line.split(separator: ":").last?.trimmingCharacters(in: .whitespaces) ?? "") ?? 0
        }
    }
    return total
}
