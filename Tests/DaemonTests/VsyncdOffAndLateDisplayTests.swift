import Foundation
import Glibc
import Testing
import VsyncCore
@testable import VsyncDaemon

/// Predicted ticks while a display is off, and subscriptions that wait for a display that is not
/// there yet, on the daemon's own loop with a scripted vblank source (the VM test bed checks the
/// same on vkms: FramePacingVMTests).
extension VsyncdTests {
    @Suite("vsyncd while a display is off or not there yet (scripted source)", .serialized) struct OffAndLate {
        typealias Changes = DisplayChanges
        static let key = Changes.key

        static func ticks(_ messages: [ServerMessage]) -> [Tick] {
            messages.compactMap { if case .tick(let t) = $0 { t } else { nil } }
        }

        @Test(.timeLimit(.minutes(1)))
        func predictedTicksWhileOffOnlyForThoseWhoAsked() throws {
            let source = ScriptedVBlankSource(displays: [Changes.virtual1(hz: 60)])
            let daemon = try InProcessDaemon(source: source)
            defer { daemon.stop() }
            let predicting = try RawClient(path: daemon.socketPath)
            #expect(try predicting.handshake(version: 2).version == 2)
            predicting.send(.subscribe(Subscribe(subscriptionID: 1, selector: .primary, range: FrameRateRange(preferredFramesPerSecond: 30), flags: .predictWhileOff)))
            let plain = try RawClient(path: daemon.socketPath)
            try plain.handshake(version: 2)
            _ = try plain.subscribe(1, fps: 30)

            // Real vblanks up to now feed the model (timestamps on the monotonic clock: predicted
            // ticks are sent when their time comes).
            let period = 1e9 / 60
            let now = monotonicNowNs()
            let last: UInt64 = 1_000
            source.push((last - 29...last).map { seq in
                .vblank(Self.key, sequence: seq, timestampNs: now - UInt64(Double(last - seq) * period))
            })
            let before = Self.ticks(predicting.messages(timeout: 1) { if case .tick(let t) = $0 { t.sequence == last } else { false } })
            #expect(before.last?.flags == .hardwareTimestamp)

            // The CRTC goes off: the predicting client keeps ticking at 30 fps from the model.
            source.update { $0[0] = Changes.virtual1(hz: 60, active: false) }
            source.push([.failed(Self.key, .off)])
            let offAt = monotonicNowNs()
            let whileOff = predicting.messages(timeout: 1.2) { _ in false }
            #expect(whileOff.contains { if case .displayEvent(let e) = $0 { e.kind == .off } else { false } })
            let predicted = Self.ticks(whileOff)
            #expect(predicted.count >= 25 && predicted.count <= 38, "\(predicted.count) predicted ticks in 1.2 s at 30 fps")
            for t in predicted {
                #expect(t.flags == .predicted && t.sequence % 2 == 0 && t.sequence > last)
                // Each is a predicted vblank: its time is on the model's 60 Hz grid.
                let exact = Double(now) + Double(t.sequence - last) * period
                #expect(abs(Double(t.timestampNs) - exact) < 2_000, "seq \(t.sequence) at \(t.timestampNs), grid \(exact)")
                #expect(t.targetSequence == t.sequence + 2)
            }
            for (a, b) in zip(predicted, predicted.dropFirst()) { #expect(b.sequence - a.sequence == 2 * (1 + UInt64(b.skipped))) }
            // Sent when their time came, not ahead of it.
            #expect(predicted.allSatisfy { $0.timestampNs >= offAt - UInt64(period) })
            // The other client hears that the display is off, and gets no ticks.
            let plainWhileOff = plain.drain()
            #expect(Self.ticks(plainWhileOff).allSatisfy { $0.sequence <= last })
            #expect(plainWhileOff.contains { if case .displayEvent(let e) = $0 { e.kind == .off } else { false } })

            // Back on (found by the 500 ms poll): predictions stop, hardware ticks resume.
            source.update { $0[0] = Changes.virtual1(hz: 60) }
            let onMessages = predicting.messages { if case .displayEvent(let e) = $0 { e.kind == .on } else { false } }
            #expect(onMessages.contains { if case .displayEvent(let e) = $0 { e.kind == .on } else { false } })
            let resume: UInt64 = 2_000
            let t0 = monotonicNowNs()
            source.push((resume...resume + 3).map { .vblank(Self.key, sequence: $0, timestampNs: t0 + UInt64(Double($0 - resume) * period)) })
            let after = Self.ticks(predicting.messages(timeout: 1) { if case .tick(let t) = $0 { t.sequence == resume + 2 } else { false } })
            #expect(after.last?.flags == .hardwareTimestamp && after.last?.sequence == resume + 2, "\(after.map { ($0.sequence, $0.flags) })")
        }

        @Test(.timeLimit(.minutes(1)))
        func aSubscriptionWaitsForItsDisplayAndTicksWhenItAppears() throws {
            // The only CRTC is off when the daemon starts: no display.
            let source = ScriptedVBlankSource(displays: [Changes.virtual1(hz: 60, active: false)])
            let daemon = try InProcessDaemon(source: source)
            defer { daemon.stop() }
            let client = try RawClient(path: daemon.socketPath)
            try client.handshake(version: 2)
            let waiting = try client.subscribe(1, fps: 30)
            #expect(waiting.isWaiting)

            // Lit by a mode set, which raises no event: the twice-a-second re-read finds it.
            let litAt = Date()
            source.update { $0[0] = Changes.virtual1(hz: 60) }
            let found = client.messages { if case .subscribed = $0 { true } else { false } }
            #expect(found.contains { if case .displayEvent(let e) = $0 { e.kind == .added && e.display.connectorName == "Virtual-1" } else { false } })
            guard case .subscribed(let live)? = found.last else { Issue.record("no SUBSCRIBED once the display came: \(found)"); return }
            #expect(!live.isWaiting && live.divisor == 2 && live.display.connectorName == "Virtual-1")
            #expect(Date().timeIntervalSince(litAt) < 1.5)
            #expect(source.isActive(Self.key))
            let now = monotonicNowNs()
            source.push((10...14).map { .vblank(Self.key, sequence: $0, timestampNs: now + UInt64($0 - 10) * 16_666_667) })
            let ticks = Self.ticks(client.messages { if case .tick(let t) = $0 { t.sequence == 14 } else { false } })
            #expect(ticks.map(\.sequence) == [10, 12, 14])

            // A connector that comes later by hotplug (a uevent: devicesChanged) is found at once.
            client.send(.subscribe(Subscribe(subscriptionID: 2, selector: .connector("HDMI-A-1"), range: .default)))
            guard case .subscribed(let second)? = client.messages(until: { if case .subscribed = $0 { true } else { false } }).last else {
                Issue.record("no answer"); return
            }
            #expect(second.isWaiting)
            let hdmi = SourceDisplay(key: DisplayKey(device: "/dev/dri/card0", crtcID: 50), connectorID: 51,
                                     connectorName: "HDMI-A-1", deviceName: "card0", isActive: true,
                                     refresh: RefreshRate(hertz: 75), width: 1920, height: 1080)
            source.update { $0.append(hdmi) }
            let pushedAt = Date()
            source.push([.devicesChanged])
            let attached = client.messages { if case .subscribed(let s) = $0 { s.subscriptionID == 2 } else { false } }
            guard case .subscribed(let hdmiLive)? = attached.last else { Issue.record("HDMI-A-1 not attached: \(attached)"); return }
            #expect(hdmiLive.display.connectorName == "HDMI-A-1" && hdmiLive.divisor == 1)
            #expect(Date().timeIntervalSince(pushedAt) < 0.4, "attached on the hotplug event, not the periodic re-read")
        }

        /// A driver that refuses vblank events (EPERM) although the display is lit: predicted
        /// ticks for the client that asked, hardware ticks again once it relents.
        @Test(.timeLimit(.minutes(1)))
        func predictedTicksWhileTheDriverRefusesVBlanks() throws {
            let source = ScriptedVBlankSource(displays: [Changes.virtual1(hz: 60)])
            let daemon = try InProcessDaemon(source: source)
            defer { daemon.stop() }
            let client = try RawClient(path: daemon.socketPath)
            try client.handshake(version: 2)
            client.send(.subscribe(Subscribe(subscriptionID: 1, selector: .primary, range: .default, flags: .predictWhileOff)))
            let period = 1e9 / 60
            let now = monotonicNowNs()
            source.push((91...100).map { seq in .vblank(Self.key, sequence: seq, timestampNs: now - UInt64(Double(100 - seq) * period)) })
            _ = client.messages(timeout: 1) { if case .tick(let t) = $0 { t.sequence == 100 } else { false } }

            // Re-arming fails with EPERM: the display stays on, its ticks are predicted.
            source.setRefusing(true)
            source.push([.failed(Self.key, .other("drmCrtcQueueSequence on CRTC 40: Operation not permitted"))])
            let predicted = Self.ticks(client.messages(timeout: 0.6) { _ in false })
            #expect(predicted.count >= 20, "\(predicted.count) predicted ticks in 0.6 s at 60 Hz")
            #expect(predicted.allSatisfy { $0.flags == .predicted && $0.sequence > 100 })
            // The daemon retries once a second; when the driver relents, real vblanks take over.
            source.setRefusing(false)
            let deadline = Date().addingTimeInterval(3)
            while !source.isActive(Self.key) && Date() < deadline { usleep(20_000) }
            #expect(source.isActive(Self.key), "vblank events not requested again")
            let t0 = monotonicNowNs()
            source.push((500...503).map { .vblank(Self.key, sequence: $0, timestampNs: t0 + UInt64(Double($0 - 500) * period)) })
            let after = Self.ticks(client.messages(timeout: 1) { if case .tick(let t) = $0 { t.sequence == 503 } else { false } })
            #expect(after.last?.flags == .hardwareTimestamp && after.last?.sequence == 503, "\(after.suffix(6).map { ($0.sequence, $0.flags.rawValue) })")
        }
    }
}

/// The kernel's uevents as the daemon reads them: only a DRM one (a connector plugged in, a card
/// added) makes it re-read the cards.
@Suite("DRM hotplug uevents")
struct UeventTests {
    static func message(_ fields: [String]) -> ArraySlice<UInt8> {
        ArraySlice(fields.flatMap { Array($0.utf8) + [0] })
    }

    @Test func onlyDRMUeventsCount() {
        let hotplug = Self.message(["change@/devices/platform/vkms/drm/card0", "ACTION=change", "DEVPATH=/devices/platform/vkms/drm/card0",
                                    "SUBSYSTEM=drm", "HOTPLUG=1", "DEVNAME=dri/card0", "SEQNUM=1234"])
        #expect(UeventSocket.isDRM(hotplug))
        let usb = Self.message(["add@/devices/pci0000:00/usb1/1-1", "ACTION=add", "SUBSYSTEM=usb", "DEVTYPE=usb_device"])
        #expect(!UeventSocket.isDRM(usb))
        // A field that only contains the words is not the subsystem.
        let lookalike = Self.message(["change@/x", "DEVPATH=/SUBSYSTEM=drm", "SUBSYSTEM=drmx"])
        #expect(!UeventSocket.isDRM(lookalike))
    }

    /// The socket opens where the daemon runs as root (here, and in the VM test bed), so
    /// plugged-in displays are seen at once rather than at the next re-read.
    @Test func theUeventSocketOpens() {
        var why = ""
        let socket = UeventSocket(failure: &why)
        #expect(socket != nil, "\(why)")
        #expect(socket?.drainForDRM() == false, "no DRM uevent is waiting on a fresh socket")
    }
}
