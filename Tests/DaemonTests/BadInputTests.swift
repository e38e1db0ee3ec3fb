import Foundation
import Glibc
import TestSupport
import Testing
import VsyncCore

extension VsyncdTests {
    /// Broken and hostile clients against the real vsyncd on the timer
    /// source, while a good client's tick stream is checked for gaps. Nested in VsyncdTests so
    /// it runs serialized with the other daemon tests (floods disturb timing on 2 cores).
    @Suite("vsyncd bad input") struct BadInput {
        /// What the protocol says a bad client gets before the disconnect.
        enum Answer: CustomStringConvertible {
            case error(ErrorCode)
            case refused(RefusalCode)
            /// ERROR malformed or unknownType: random bytes after the handshake may be either.
            case anyFatalError
            /// No message: an empty datagram reads as end-of-file on SOCK_SEQPACKET.
            case closeOnly

            var description: String {
                switch self {
                case .error(let c): "ERROR \(c)"
                case .refused(let c): "REFUSED \(c)"
                case .anyFatalError: "ERROR malformed/unknownType"
                case .closeOnly: "a disconnect"
                }
            }
        }

        struct BadClient {
            var name: String
            /// Handshake (and optionally subscribe) before sending the bad datagram.
            var handshake: Bool
            var subscribed = false
            var datagram: [UInt8]
            var answer: Answer
        }

        static func badClients() -> [BadClient] {
            let hello = BadDatagram.hello
            let pause = ClientMessage.pause(subscriptionID: 1).encoded()
            var bad: [BadClient] = [
                BadClient(name: "truncated HELLO", handshake: false,
                          datagram: BadDatagram.sized(Array(hello.prefix(20))), answer: .refused(.badHandshake)),
                BadClient(name: "truncated PAUSE", handshake: true,
                          datagram: BadDatagram.sized(Array(pause.prefix(10))), answer: .error(.malformed)),
                BadClient(name: "shorter than a header", handshake: true,
                          datagram: [0x05, 0x00, 0x04, 0x00], answer: .error(.malformed)),
                BadClient(name: "oversized (5000 bytes)", handshake: true,
                          datagram: BadDatagram.request(type: 0x02, count: 5000), answer: .error(.malformed)),
                BadClient(name: "oversized (4097 bytes) before the handshake", handshake: false,
                          datagram: BadDatagram.request(type: 0x01, count: 4097), answer: .refused(.badHandshake)),
                BadClient(name: "oversized (65000 bytes) after subscribing", handshake: true, subscribed: true,
                          datagram: BadDatagram.request(type: 0x03, count: 65000, fill: 0xFF), answer: .error(.malformed)),
                BadClient(name: "unknown type 0x42", handshake: true,
                          datagram: BadDatagram.request(type: 0x42, count: 12), answer: .error(.unknownType)),
                BadClient(name: "a server type (TICK) sent by a client", handshake: true,
                          datagram: ServerMessage.tick(Tick(
                              subscriptionID: 1, displayID: 1, sequence: 1, timestampNs: 1, targetTimestampNs: 2,
                              displayIntervalNs: 1, clientIntervalNs: 1, skipped: 0, divisor: 1, flags: [])).encoded(),
                          answer: .error(.unknownType)),
                BadClient(name: "a future version in HELLO (current + 1 to + 2)", handshake: false,
                          datagram: ClientMessage.hello(Hello(minVersion: WireProtocol.currentVersion + 1,
                                                              maxVersion: WireProtocol.currentVersion + 2, clientName: "future")).encoded(),
                          answer: .refused(.versionUnsupported)),
                BadClient(name: "version 0 in HELLO", handshake: false,
                          datagram: ClientMessage.hello(Hello(minVersion: 0, maxVersion: 0, clientName: "past")).encoded(),
                          answer: .refused(.versionUnsupported)),
                BadClient(name: "HELLO with bad magic", handshake: false,
                          datagram: { var h = hello; h[8] = 0x00; return h }(), answer: .refused(.badHandshake)),
                BadClient(name: "SUBSCRIBE before the handshake", handshake: false,
                          datagram: ClientMessage.subscribe(Subscribe(subscriptionID: 1, selector: .primary, range: .default)).encoded(),
                          answer: .error(.notHandshaken)),
                BadClient(name: "size field larger than the datagram", handshake: true,
                          datagram: BadDatagram.sized(pause, sizeField: 100), answer: .error(.malformed)),
                BadClient(name: "size field smaller than the datagram (HELLO)", handshake: false,
                          datagram: BadDatagram.sized(hello, sizeField: 40), answer: .refused(.badHandshake)),
                BadClient(name: "size field 0", handshake: true,
                          datagram: BadDatagram.sized(pause, sizeField: 0), answer: .error(.malformed)),
                BadClient(name: "second HELLO", handshake: true, datagram: hello, answer: .error(.malformed)),
                BadClient(name: "subscription id 0", handshake: true,
                          datagram: ClientMessage.subscribe(Subscribe(subscriptionID: 0, selector: .primary, range: .default)).encoded(),
                          answer: .error(.malformed)),
                BadClient(name: "NaN frame rate in SET_RATE", handshake: true, subscribed: true,
                          datagram: { () -> [UInt8] in
                              var b = ClientMessage.setRate(SetRate(subscriptionID: 1, range: .default)).encoded()
                              withUnsafeBytes(of: Float.nan.bitPattern.littleEndian) { b.replaceSubrange(20..<24, with: $0) }
                              return b
                          }(), answer: .error(.malformed)),
                BadClient(name: "empty datagram", handshake: true, datagram: [], answer: .closeOnly),
            ]
            // Random garbage, seeded: 1–300 bytes, before and after the handshake. Anything the
            // codec happens to accept, or to read as a SUBSCRIBE refused only for its selector
            // (not fatal), is not garbage and is left out.
            var rng = SplitMix64(seed: 0x5EED_4B1D)
            var made = 0
            while made < 24 {
                let count = Int.random(in: 1...300, using: &rng)
                var bytes = (0..<count).map { _ in UInt8.random(in: 0...255, using: &rng) }
                if made % 2 == 1, bytes.count >= 4 { bytes = BadDatagram.sized(bytes) }  // half with an honest size field
                do throws(WireError) { _ = try ClientMessage.decode(bytes); continue } catch { if case .badSelector = error { continue } }
                let after = made % 3 != 0
                bad.append(BadClient(
                    name: "random garbage #\(made) (\(count) bytes, \(after ? "after" : "before") the handshake)",
                    handshake: after, subscribed: made % 6 == 1, datagram: bytes,
                    answer: after ? .anyFatalError : .refused(.badHandshake)))
                made += 1
            }
            return bad
        }

        @Test func malformedRequestsGetAnErrorAndADisconnectWhileGoodClientsKeepTicking() throws {
            let daemon = try DaemonProcess(hertz: 60)
            let good = TickWatcher(socketPath: daemon.socketPath, daemonPID: daemon.pid)
            defer { good.stop() }
            try #require(good.current.setupError == nil, "good client: \(good.current.setupError ?? "")")
            try #require(good.waitForTicks(10, timeout: 5), "the good client got no ticks")
            let startSequence = good.current.lastSequence ?? 0
            let start = Date()

            // Four rounds of every bad client, so the good stream is watched over a few seconds.
            let bad = Array(repeating: Self.badClients(), count: 4).joined()
            for c in bad {
                let client = try RawClient(path: daemon.socketPath)
                if c.handshake { try client.handshake(name: "bad") }
                if c.subscribed {
                    _ = try client.subscribe(1, fps: 30)
                    #expect(client.nextTick(timeout: 1) != nil, "\(c.name): no tick before misbehaving")
                }
                client.send(c.datagram)
                let outcome = client.outcome()
                #expect(outcome.closed, "\(c.name): not disconnected (\(outcome))")
                switch c.answer {
                case .error(let code):
                    #expect(outcome.error?.code == code, "\(c.name): expected \(c.answer), got \(outcome)")
                case .refused(let code):
                    #expect(outcome.refusal?.code == code, "\(c.name): expected \(c.answer), got \(outcome)")
                case .anyFatalError:
                    let code = outcome.error?.code
                    #expect(code == .malformed || code == .unknownType, "\(c.name): expected \(c.answer), got \(outcome)")
                case .closeOnly:
                    #expect(outcome.messages.isEmpty, "\(c.name): expected \(c.answer), got \(outcome)")
                }
                if let e = outcome.error { #expect(!e.message.isEmpty, "\(c.name): the ERROR has no text") }
                if let r = outcome.refusal { #expect(!r.message.isEmpty, "\(c.name): the REFUSED has no text") }
                try #require(daemon.process.isRunning, "vsyncd died after \(c.name); log:\n\(daemon.log)")
            }
            // Let the stream run a little past the last bad client, then judge it whole.
            let target = good.current.ticks + 5
            #expect(good.waitForTicks(target, timeout: 3))
            let elapsed = Date().timeIntervalSince(start)
            let report = good.stop()

            #expect(report.gaps.count == 0, "the good client's stream had gaps: \(report.gaps.prefix(5))")
            #expect(report.unexplained.isEmpty, "the good client missed ticks while vsyncd had the CPU: \(report.unexplained.prefix(5))")
            print("BadInput good client: \(report.ticks) ticks, \(report.gaps.count) silent gaps, \(report.skippedTicks) announced skipped (max \(report.maxSkipped) in a row)")
            #expect(report.stalls.count == 0, "the good client's stream stalled: \(report.stalls.prefix(5))")
            // 20 fps over the whole run, allowing for the start and end of the window, counted by
            // sequence: ticks delivered and those skipped (each explained above).
            let received = Int(((report.lastSequence ?? 0) - startSequence) / report.divisor)
            #expect(Double(received) >= elapsed * 20 * 0.9 - 2, "\(received) frames in \(elapsed) s at 20 fps")
            print("BadInput malformed: \(bad.count) bad clients in \(String(format: "%.2f", elapsed)) s; good client \(received) frames, \(report.gaps.count) silent gaps, \(report.skippedTicks) ticks announced skipped, max lateness \(report.maxLatenessNs / 1000) µs")
            #expect(daemon.process.isRunning)
            // Every disconnect is logged with its reason.
            let log = daemon.log
            for reason in ["malformed request", "unknown request type", "bad handshake", "before the handshake", "refused: client speaks"] {
                #expect(log.contains(reason), "no '\(reason)' line in the daemon's log")
            }
            #expect(daemon.stop() == 0)
        }

        @Test func connectionFloodPastTheCapIsRefusedWithoutLeaks() throws {
            let cap = 64
            let daemon = try DaemonProcess(hertz: 60, extra: ["--max-clients", "\(cap)", "--log-level", "info"])
            let good = TickWatcher(socketPath: daemon.socketPath, daemonPID: daemon.pid)
            defer { good.stop() }
            try #require(good.waitForTicks(10, timeout: 5), "the good client got no ticks")

            // Fill the daemon to its cap (the good client holds one place).
            var held: [RawClient] = []
            for _ in 0..<(cap - 1) {
                let c = try RawClient(path: daemon.socketPath)
                try c.handshake(name: "held")
                held.append(c)
            }
            // A warm-up round, so one-time allocations are in the baseline.
            let warmUp = flood(daemon, connections: 300, cap: cap)
            #expect(warmUp.refused == 300, "warm-up: \(warmUp)")
            let fdsBefore = openFDCount(daemon.pid)
            let rssBefore = try residentKiB(daemon.pid)

            let result = flood(daemon, connections: Self.connections, cap: cap)
            #expect(result.refused == Self.connections, "\(result)")
            #expect(result.wrongText.isEmpty, "refusals without the cap in their text: \(result.wrongText.prefix(3))")

            // The refused connections are gone from the daemon: fd count back to the baseline.
            #expect(waitUntil(timeout: 5) { openFDCount(daemon.pid) == fdsBefore },
                    "fds \(fdsBefore) before the flood, \(openFDCount(daemon.pid)) after")
            let rssAfter = try residentKiB(daemon.pid)
            #expect(rssAfter - rssBefore <= Self.rssBoundKiB,
                    "RSS grew \(rssAfter - rssBefore) KiB over \(Self.connections) refused connections (\(rssBefore) → \(rssAfter) KiB)")
            print("BadInput flood: \(result.refused) refused in \(String(format: "%.2f", result.seconds)) s; fds \(fdsBefore) → \(openFDCount(daemon.pid)); RSS \(rssBefore) → \(rssAfter) KiB")

            // The clients inside the cap are still served.
            for c in held.prefix(8) {
                c.send(.listDisplays)
                guard case .message(.displayList(let list)) = c.receive() else {
                    Issue.record("a held client lost its connection during the flood"); break
                }
                #expect(list.count == 1)
            }
            // Leaving frees the places: every held fd is released.
            let fdsHeld = openFDCount(daemon.pid)
            held.removeAll()
            #expect(waitUntil(timeout: 5) { openFDCount(daemon.pid) == fdsHeld - (cap - 1) },
                    "fds \(fdsHeld) with \(cap) clients, \(openFDCount(daemon.pid)) after \(cap - 1) left")
            let again = try RawClient(path: daemon.socketPath)
            #expect(try again.handshake().version == 1)

            let report = good.stop()
            #expect(report.gaps.count == 0, "the good client's stream had gaps during the flood: \(report.gaps.prefix(5))")
            #expect(report.unexplained.isEmpty, "the good client missed ticks while vsyncd had the CPU: \(report.unexplained.prefix(5))")
            print("BadInput good client: \(report.ticks) ticks, \(report.gaps.count) silent gaps, \(report.skippedTicks) announced skipped (max \(report.maxSkipped) in a row)")
            #expect(report.stalls.count == 0, "the good client's stream stalled during the flood: \(report.stalls.prefix(5))")
            #expect(daemon.log.contains("refused: at the cap of \(cap) clients"))
            #expect(daemon.stop() == 0)
        }

        @Test func clientsOpeningAndClosingInALoopLeakNothing() throws {
            let daemon = try DaemonProcess(hertz: 60, extra: ["--log-level", "info"])
            let good = TickWatcher(socketPath: daemon.socketPath, daemonPID: daemon.pid)
            defer { good.stop() }
            try #require(good.waitForTicks(10, timeout: 5), "the good client got no ticks")

            let warmUp = try openCloseLoop(daemon, iterations: 300)
            #expect(warmUp == 300)
            settle(daemon)
            let fdsBefore = openFDCount(daemon.pid)
            let rssBefore = try residentKiB(daemon.pid)

            let start = Date()
            let done = try openCloseLoop(daemon, iterations: Self.connections)
            let seconds = Date().timeIntervalSince(start)
            #expect(done == Self.connections)

            #expect(waitUntil(timeout: 5) { openFDCount(daemon.pid) == fdsBefore },
                    "fds \(fdsBefore) before \(Self.connections) open/close cycles, \(openFDCount(daemon.pid)) after")
            let rssAfter = try residentKiB(daemon.pid)
            #expect(rssAfter - rssBefore <= Self.rssBoundKiB,
                    "RSS grew \(rssAfter - rssBefore) KiB over \(Self.connections) open/close cycles (\(rssBefore) → \(rssAfter) KiB)")
            print("BadInput open/close: \(Self.connections) cycles in \(String(format: "%.2f", seconds)) s; fds \(fdsBefore) → \(openFDCount(daemon.pid)); RSS \(rssBefore) → \(rssAfter) KiB")

            let report = good.stop()
            #expect(report.gaps.count == 0, "the good client's stream had gaps: \(report.gaps.prefix(5))")
            #expect(report.unexplained.isEmpty, "the good client missed ticks while vsyncd had the CPU: \(report.unexplained.prefix(5))")
            print("BadInput good client: \(report.ticks) ticks, \(report.gaps.count) silent gaps, \(report.skippedTicks) announced skipped (max \(report.maxSkipped) in a row)")
            #expect(report.stalls.count == 0, "the good client's stream stalled: \(report.stalls.prefix(5))")
            // Every connection was logged on the way in.
            let connects = daemon.log.components(separatedBy: "client connected: pid").count - 1
            #expect(connects >= Self.connections + 300, "\(connects) 'client connected' lines for \(Self.connections + 301) connections")
            #expect(daemon.stop() == 0)
        }

        /// The daemon's fd limit is below its client cap (systemd's default soft limit is 1024,
        /// the default cap 1024): a flood must still get a clear answer, and the daemon must not
        /// spin on a listening socket it cannot accept from.
        @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/prlimit")))
        func floodPastTheFileDescriptorLimitIsAnsweredWithoutSpinning() throws {
            let daemon = try DaemonProcess(hertz: 60, extra: ["--log-level", "info"])
            let good = TickWatcher(socketPath: daemon.socketPath, daemonPID: daemon.pid)
            defer { good.stop() }
            try #require(good.waitForTicks(10, timeout: 5), "the good client got no ticks")
            let limit = openFDCount(daemon.pid) + 20
            let prlimit = Process()
            prlimit.executableURL = URL(fileURLWithPath: "/usr/bin/prlimit")
            prlimit.arguments = ["--pid", "\(daemon.pid)", "--nofile=\(limit):\(limit)"]
            try prlimit.run()
            prlimit.waitUntilExit()
            try #require(prlimit.terminationStatus == 0, "prlimit failed")

            // 60 connections each send HELLO at once; then each gets a moment to be answered
            // (bounded: about 4 s in all even if none is).
            var clients: [RawClient] = []
            for _ in 0..<60 {
                let c = try RawClient(path: daemon.socketPath)
                c.send(.hello(Hello(minVersion: 1, maxVersion: 1, clientName: "flood")))
                clients.append(c)
            }
            let cpuBefore = try cpuSeconds(daemon.pid)
            usleep(1_000_000)
            var welcomed = 0, refused = 0, unanswered = 0
            for c in clients {
                switch c.receive(timeout: 0.05) {
                case .message(.welcome): welcomed += 1
                case .message(.refused), .closed: refused += 1
                default: unanswered += 1
                }
            }
            usleep(1_000_000)
            let cpu = try cpuSeconds(daemon.pid) - cpuBefore
            let logBytes = (try? FileManager.default.attributesOfItem(atPath: daemon.logURL.path)[.size] as? Int) ?? 0
            let report = good.stop()
            daemon.stop()
            clients.removeAll()
            print("BadInput fd limit \(limit): \(welcomed) welcomed, \(refused) refused, \(unanswered) unanswered; daemon CPU \(cpu) s in ~2 s; log \(logBytes) bytes")
            #expect(welcomed > 0)
            #expect(unanswered == 0, "\(unanswered) of 60 connections got neither WELCOME nor a refusal")
            #expect(cpu < 0.3, "vsyncd used \(cpu) s of CPU in ~2 s with its fd limit reached: it spins on accept")
            #expect(logBytes < 1_000_000, "vsyncd logged \(logBytes) bytes in ~2 s: 'accept failed' is not rate-limited")
            #expect(report.gaps.count == 0, "the good client's stream had \(report.gaps.count) gaps: \(report.gaps.prefix(5))")
            #expect(report.unexplained.isEmpty, "the good client missed ticks while vsyncd had the CPU: \(report.unexplained.prefix(5))")
            print("BadInput good client: \(report.ticks) ticks, \(report.gaps.count) silent gaps, \(report.skippedTicks) announced skipped (max \(report.maxSkipped) in a row)")
        }

        /// utime + stime of a process, in seconds (/proc/PID/stat fields 14 and 15). Fails the
        /// test rather than return 0 when /proc cannot be parsed: "CPU < 0.3 s" must not pass
        /// because nothing was measured.
        func cpuSeconds(_ pid: Int32) throws -> Double {
            let stat = try #require(try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8), "cannot read /proc/\(pid)/stat")
            let close = try #require(stat.lastIndex(of: ")"), "unreadable /proc/\(pid)/stat: \(stat)")
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            try #require(fields.count > 12, "/proc/\(pid)/stat has \(fields.count) fields after the name")
            let user = try #require(Double(fields[11]), "utime '\(fields[11])'")
            let system = try #require(Double(fields[12]), "stime '\(fields[12])'")
            return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
        }

        /// Connections in the flood and in the open/close loop: well past the cap, and enough
        /// that a leak of one fd or one client record per connection cannot hide.
        static let connections = 10_000

        /// RSS may grow by at most this much (KiB) over `connections` after a warm-up round:
        /// about 200 bytes a connection, less than one leaked client record with its buffers.
        static let rssBoundKiB = 2048

        struct FloodResult: CustomStringConvertible {
            var refused = 0, other: [String] = [], wrongText: [String] = [], seconds = 0.0
            var description: String { "\(refused) refused, \(other.count) otherwise: \(other.prefix(3))" }
        }

        /// Waits (bounded, 5 s) until the daemon's fd count holds still for 300 ms: it has
        /// processed the disconnects of the clients just closed.
        func settle(_ daemon: DaemonProcess) {
            var last = openFDCount(daemon.pid)
            var stableSince = Date()
            let deadline = Date().addingTimeInterval(5)
            while Date() < deadline, Date().timeIntervalSince(stableSince) < 0.3 {
                usleep(20_000)
                let now = openFDCount(daemon.pid)
                if now != last { last = now; stableSince = Date() }
            }
        }

        /// Opens `connections` connections to a daemon at its cap, 100 at a time (below the
        /// listen backlog of 128, so connect never blocks even if the daemon stopped accepting),
        /// and checks each is refused with tooManyClients and closed.
        func flood(_ daemon: DaemonProcess, connections: Int, cap: Int) -> FloodResult {
            var result = FloodResult()
            let start = Date()
            var remaining = connections
            while remaining > 0 {
                let batch = min(100, remaining)
                remaining -= batch
                var open: [RawClient] = []
                for _ in 0..<batch {
                    do { open.append(try RawClient(path: daemon.socketPath)) } catch { result.other.append("\(error)") }
                }
                for c in open {
                    let o = c.outcome(timeout: 3)
                    if let r = o.refusal, r.code == .tooManyClients, o.closed {
                        result.refused += 1
                        if !r.message.contains("at most \(cap) clients") { result.wrongText.append(r.message) }
                    } else {
                        result.other.append("\(o)")
                    }
                }
            }
            result.seconds = Date().timeIntervalSince(start)
            return result
        }
    }
}
