import Foundation
import Glibc
import Testing
import VsyncCore

extension VsyncdTests {
    @Suite("vsyncd slow and broken clients") struct SlowClients {
        @Test func clientThatStopsReadingGetsTheNewestTickWithSkipped() throws {
            let daemon = try DaemonProcess(hertz: 60, extra: ["--stall-timeout", "10"])
            let client = try RawClient(path: daemon.socketPath)
            try client.handshake()
            _ = try client.subscribe(1, fps: 0)
            let before = try #require(client.nextTick())
            _ = client.drain()

            usleep(1_500_000)  // stop reading: ~90 vblanks go by
            let stopped = monotonicNowNs()
            let drained = client.drain().compactMap { if case .tick(let t) = $0 { t } else { nil } }
            let after = (0..<6).compactMap { _ in client.nextTick() }
            let all = drained + after

            // Not a queue of 90 stale ticks: only what the small socket buffer held, then one
            // coalesced tick, the newest, carrying the count of those it replaced.
            #expect(drained.count < 40)
            // The coalesced tick is the one that skipped the most (on a loaded machine a few
            // vblanks may also be missed by the daemon itself; those count as skipped too).
            let newest = try #require(all.max { $0.skipped < $1.skipped })
            #expect(newest.skipped >= 30)
            #expect(all.filter { $0.skipped >= 10 }.count == 1)
            #expect(newest.sequence > before.sequence + 60)
            #expect(newest.timestampNs <= stopped + 50_000_000)
            // Every due tick is accounted for: delivered, or counted in the next one's `skipped`.
            for (a, b) in zip(all, all.dropFirst()) {
                #expect(b.sequence - a.sequence - 1 == UInt64(b.skipped))
            }
            #expect(after.suffix(4).allSatisfy { $0.skipped < 3 })
            print("coalescing: \(drained.count) ticks waiting after 1.5 s, skipped total \(all.map(\.skipped).reduce(0, +))")
        }

        @Test func clientFullPastTheBoundIsDisconnectedAlone() throws {
            let daemon = try DaemonProcess(hertz: 120, extra: ["--stall-timeout", "0.5"])
            let stuck = try RawClient(path: daemon.socketPath)
            try stuck.handshake(name: "stuck")
            _ = try stuck.subscribe(1, fps: 0)
            let healthy = try RawClient(path: daemon.socketPath)
            try healthy.handshake(name: "healthy")
            _ = try healthy.subscribe(1, fps: 0)

            // Keep the healthy client reading for 2 s while the stuck one never reads.
            var healthyTicks = 0
            let end = Date().addingTimeInterval(2)
            while Date() < end { if healthy.nextTick(timeout: 0.2) != nil { healthyTicks += 1 } }
            #expect(healthyTicks > 180)
            #expect(stuck.waitForClose())
            #expect(daemon.log.contains("'stuck': socket full"))
            #expect(healthy.nextTick() != nil)
        }

        @Test func clientsVanishingMidBroadcastDoNotHurtTheDaemon() throws {
            // Several subscriptions per client on the same display, then the socket is closed
            // while ticks are being sent: the send fails (EPIPE) in the middle of a broadcast.
            let daemon = try DaemonProcess(hertz: 500)
            let watcher = try RawClient(path: daemon.socketPath)
            try watcher.handshake()
            _ = try watcher.subscribe(1, fps: 0)
            for round in 0..<40 {
                let c = try RawClient(path: daemon.socketPath)
                try c.handshake(name: "vanishing-\(round)")
                for id in 1...4 { _ = try c.subscribe(UInt32(id), fps: 0) }
                usleep(5_000)
                // Closing drops the client's unread ticks; the daemon finds out from a send or a recv.
            }
            usleep(200_000)
            _ = watcher.drain()
            #expect(watcher.nextTick() != nil)
            #expect(daemon.process.isRunning)
            #expect(daemon.stop() == 0)
        }

        @Test func malformedMessageDisconnectsOnlyThatClient() throws {
            let daemon = try DaemonProcess(hertz: 60)
            let good = try RawClient(path: daemon.socketPath)
            try good.handshake(name: "good")
            _ = try good.subscribe(1, fps: 0)
            #expect(good.nextTick() != nil)

            let bad = try RawClient(path: daemon.socketPath)
            try bad.handshake(name: "bad")
            var lying = ClientMessage.pause(subscriptionID: 1).encoded()
            lying[2] = 200  // size field lies
            bad.send(lying)
            guard case .message(.error(let e)) = bad.receive() else { Issue.record("no ERROR"); return }
            #expect(e.code == .malformed)
            #expect(bad.receive() == .closed)

            let unknown = try RawClient(path: daemon.socketPath)
            try unknown.handshake(name: "unknown")
            unknown.send([0x77, 0x00, 0x08, 0x00, 0, 0, 0, 0])
            guard case .message(.error(let e2)) = unknown.receive() else { Issue.record("no ERROR"); return }
            #expect(e2.code == .unknownType)
            #expect(unknown.receive() == .closed)

            let oversized = try RawClient(path: daemon.socketPath)
            try oversized.handshake(name: "big")
            oversized.send([UInt8](repeating: 1, count: 6000))
            guard case .message(.error(let e3)) = oversized.receive() else { Issue.record("no ERROR"); return }
            #expect(e3.code == .malformed)

            // The good client kept ticking throughout.
            _ = good.drain()
            var ticks: [Tick] = []
            while ticks.count < 5, let t = good.nextTick() { ticks.append(t) }
            #expect(ticks.count == 5)
            #expect(daemon.log.contains("'bad': malformed request"))
        }
    }
}
