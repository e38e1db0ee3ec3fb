import Foundation
import Testing
import VsyncCore

/// What a replay (`--source replay:FILE@SPEED`) shows clients, through the real vsyncd and a raw
/// socket client: the trace's card and connector names, a distinct id per connector, and at a
/// SPEED ≠ 1 a display SPEED times as fast whose timestamps are CLOCK_MONOTONIC times the
/// client has reached.
extension VsyncdTests {
    @Suite("vsyncd replay source") struct ReplaySource {
        /// vkms's 60 Hz mode: 65 MHz over 1344 × 806, a period of exactly 16665600 ns.
        static let mode = "1024x768 78125/1302"
        static let periodNs: UInt64 = 16_665_600

        /// Writes a synthetic trace to a temporary file: `displays` lines, a mode for each at the
        /// start, then `vblanks` vblanks per display on the mode's exact grid.
        static func trace(_ displays: [String], vblanks: Int) throws -> URL {
            var lines = ["vsync-trace 2", "# SYNTHETIC: written by ReplaySourceTests"]
            lines += displays.enumerated().map { "display \($0.offset + 1) \($0.element)" }
            lines += displays.indices.map { "mode 1000000000 \($0 + 1) \(mode)" }
            for k in 0..<vblanks {
                for d in displays.indices { lines.append("vblank \(d + 1) \(100 + k) \(2_000_000_000 + UInt64(k) * periodNs)") }
            }
            let url = FileManager.default.temporaryDirectory.appendingPathComponent("replay-\(UUID().uuidString.prefix(8)).trace")
            try (lines.joined(separator: "\n") + "\n").write(to: url, atomically: true, encoding: .utf8)
            return url
        }

        /// Two cards that both have CRTC 45, as two vkms cards do: each replayed display keeps
        /// its card's and connector's names, its own connector id, and every selector vsyncd
        /// suggests for them resolves to the one it names.
        @Test func replayedCardsKeepTheirNamesAndEverySuggestionResolves() throws {
            let url = try Self.trace(["/dev/dri/card0 45 Virtual-1", "/dev/dri/card1 45 Virtual-2"], vblanks: 3)
            defer { try? FileManager.default.removeItem(at: url) }
            let daemon = try DaemonProcess(extra: ["--source", "replay:\(url.path)"])
            for version in [UInt16(2), 4] {
                let client = try RawClient(path: daemon.socketPath)
                try client.handshake(version: version)
                client.send(.listDisplays)
                guard case .message(.displayList(let list)) = client.receive() else { Issue.record("no DISPLAY_LIST"); continue }
                #expect(list.map(\.deviceName) == ["card0", "card1"] && list.map(\.connectorName) == ["Virtual-1", "Virtual-2"], "\(list)")
                #expect(list.map(\.crtcID) == [45, 45] && Set(list.map(\.connectorID)).count == 2 && !list.contains { $0.connectorID == 45 },
                        "connector ids \(list.map(\.connectorID))")

                var nextID: UInt32 = 100
                client.send(.subscribe(Subscribe(subscriptionID: 1, selector: .crtc(45), range: .default)))
                guard case .message(.error(let e)) = client.receive() else { Issue.record("crtc:45 on two cards was not refused"); continue }
                #expect(e.code == .unknownDisplay, "\(e)")
                let suggested = SelectorRule.suggestions(in: e.message)
                #expect(suggested.count == 3, "two candidates and an 'as in': \(e.message)")
                let resolved = SelectorRule.sendBack(suggested, client, version: version, nextID: &nextID)
                #expect(Set(resolved.values.map(\.displayID)).count == 2, "the candidates name both displays: \(resolved)")
                if version >= 3 {
                    #expect(resolved["crtc:45@card1"]?.deviceName == "card1" && resolved["crtc:45@card0"]?.deviceName == "card0", "\(resolved)")
                }
                client.send(.subscribe(Subscribe(subscriptionID: 2, selector: .display(99), range: .default)))
                SelectorRule.expectRefused(client, id: 2, "display:99", version: version, nextID: &nextID)
            }
            // The recorded names select as on the recorded machine.
            let client = try RawClient(path: daemon.socketPath)
            try client.handshake(version: 3)
            for (i, text) in ["Virtual-2", "Virtual-2@card1", "crtc:45@/dev/dri/card1", "@card1"].enumerated() {
                let s = try client.subscribe(UInt32(10 + i), fps: 0, flags: .startPaused, selector: try DisplaySelector.parse(text))
                #expect(s.display.deviceName == "card1" && s.display.connectorName == "Virtual-2", "'\(text)' → \(s.display)")
            }
        }

        /// `@4`: the trace's timeline compressed onto CLOCK_MONOTONIC. Every tick's timestamp is
        /// a time the client's clock has reached when it reads the tick, ticks are a quarter of
        /// the trace's period apart, and the display record says 4 × the refresh.
        @Test(.timeLimit(.minutes(1)))
        func aSpedUpReplayCompressesTheTimelineOntoTheClock() throws {
            // 20 s of trace: 5 s at 4×, time enough to connect on a loaded machine.
            let url = try Self.trace(["/dev/dri/card0 45 Virtual-1"], vblanks: 1200)
            defer { try? FileManager.default.removeItem(at: url) }
            let daemon = try DaemonProcess(extra: ["--source", "replay:\(url.path)@4"])
            let client = try RawClient(path: daemon.socketPath)
            try client.handshake(version: 4)
            let full = try client.subscribe(1, fps: 0)
            let fast = RefreshRate(numerator: 78125 * 4, denominator: 1302)
            #expect(full.display.refreshMillihertz == fast.millihertz, "record: \(full.display.refreshMillihertz) mHz")
            #expect(full.display.periodNs == Self.periodNs / 4 && full.displayIntervalNs == Self.periodNs / 4)
            // 60 fps of a 240 Hz display: every fourth vblank.
            #expect(try client.subscribe(2, fps: 60, flags: .startPaused).divisor == 4)

            var ticks: [(tick: Tick, receivedNs: UInt64)] = []
            while ticks.count < 120, let t = client.nextTick(timeout: 2) {
                ticks.append((t, monotonicNowNs()))
            }
            try #require(ticks.count == 120, "\(ticks.count) ticks: \(daemon.log)")
            for (t, received) in ticks {
                #expect(t.timestampNs <= received, "vblank \(t.sequence) stamped \(t.timestampNs - received) ns after it was read")
                #expect(t.displayIntervalNs == Self.periodNs / 4 && t.flags.contains(.synthetic))
            }
            for (a, b) in zip(ticks, ticks.dropFirst()) {
                #expect(b.tick.timestampNs - a.tick.timestampNs == (b.tick.sequence - a.tick.sequence) * Self.periodNs / 4,
                        "vblanks \(a.tick.sequence) → \(b.tick.sequence)")
            }
        }
    }
}
