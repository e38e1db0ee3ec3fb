import Foundation
import Glibc
import Logging
import Synchronization
import Testing
import VsyncCore
@testable import VsyncDaemon

/// A vblank source the test drives: displays and vblanks are pushed from the test thread, and a
/// pipe wakes the server's epoll loop. All state is behind a Mutex.
final class ScriptedVBlankSource: VBlankSource, Sendable {
    /// What the test pushes: source events naming displays by key; the source turns keys into
    /// the server's tokens as a real source does.
    enum Scripted: Sendable {
        case vblank(DisplayKey, sequence: UInt64, timestampNs: UInt64)
        case failed(DisplayKey, VBlankFailure)
        case devicesChanged
    }
    struct State {
        var displays: [SourceDisplay] = []
        var events: [Scripted] = []
        var active: [DisplayKey: UInt32] = [:]
        var tokens: [DisplayKey: UInt32] = [:]
        var activations = 0
        /// The driver refuses vblank events (as some do with EPERM) although the CRTC is lit.
        var refusing = false
        /// A card is coming up (`wantsRescanSoon`): the server should rescan until it is there.
        var comingUp = false
        /// VRR_ENABLED reads (the server polls it while a VRR-capable display is followed).
        var variableRefreshPolls = 0
        /// Re-reads of one display (`refresh`): what a deviating interval prompts.
        var refreshes = 0
    }
    let state = Mutex(State())
    let wakeRead: Int32
    let wakeWrite: Int32

    init(displays: [SourceDisplay]) {
        var fds: [Int32] = [0, 0]
        pipe(&fds)
        wakeRead = fds[0]; wakeWrite = fds[1]
        _ = fcntl(wakeRead, F_SETFL, O_NONBLOCK)
        state.withLock { $0.displays = displays }
    }

    deinit { close(wakeRead); close(wakeWrite) }

    var isSynthetic: Bool { false }
    var pollDescriptors: [Int32] { [wakeRead] }
    func rescan() -> [SourceDisplay] { state.withLock { $0.displays } }
    func refresh(_ key: DisplayKey) -> SourceDisplay? {
        state.withLock { s in
            s.refreshes += 1
            return s.displays.first { $0.key == key }
        }
    }
    var refreshes: Int { state.withLock { $0.refreshes } }
    func setActive(_ key: DisplayKey, _ on: Bool, token: UInt32) throws(VBlankFailure) {
        let refused = state.withLock { s in on && s.refusing }
        if refused { throw .other("drmCrtcQueueSequence on CRTC \(key.crtcID): Operation not permitted") }
        let off = state.withLock { s -> Bool in
            s.tokens[key] = token
            // As DRMVBlankSource: turning events off never fails, also for a display now gone.
            if !on { s.active[key] = nil; return false }
            guard let d = s.displays.first(where: { $0.key == key }), d.isActive || !on else { return true }
            if on { s.active[key] = token; s.activations += 1 } else { s.active[key] = nil }
            return false
        }
        if off { throw .off }
    }
    func readEvents(from fd: Int32, into events: inout [SourceEvent]) {
        var byte: UInt8 = 0
        while read(fd, &byte, 1) > 0 {}
        events += state.withLock { s in
            let out = s.events.compactMap { e -> SourceEvent? in
                switch e {
                case let .vblank(key, sequence, timestampNs):
                    return s.active[key].map { .vblank(token: $0, sequence: sequence, timestampNs: timestampNs) }
                case let .failed(key, failure):
                    // As a real source: a display whose events failed gets none until asked again.
                    s.active[key] = nil
                    return s.tokens[key].map { .failed(token: $0, failure) }
                case .devicesChanged: return .devicesChanged
                }
            }
            s.events = []
            return out
        }
    }

    func push(_ events: [Scripted]) {
        state.withLock { $0.events += events }
        var byte: UInt8 = 1
        _ = write(wakeWrite, &byte, 1)
    }
    func isActive(_ key: DisplayKey) -> Bool { state.withLock { $0.active[key] != nil } }
    func variableRefreshEnabled(_ key: DisplayKey) -> Bool? {
        state.withLock { s in
            s.variableRefreshPolls += 1
            return s.displays.first { $0.key == key }?.variableRefresh?.enabled
        }
    }
    var variableRefreshPolls: Int { state.withLock { $0.variableRefreshPolls } }
    func update(_ body: (inout [SourceDisplay]) -> Void) { state.withLock { body(&$0.displays) } }
    func setRefusing(_ refusing: Bool) { state.withLock { $0.refusing = refusing } }
}

/// The Server on its own thread. The test thread never touches the server after handing it
/// over; it only writes to the stop pipe, so the unchecked Sendable is safe here.
final class InProcessDaemon: @unchecked Sendable {
    let socketPath: String
    let directory: URL
    private let stopWrite: Int32
    private let done = DispatchSemaphore(value: 0)

    /// `clocks`: CLOCK_MONOTONIC and CLOCK_BOOTTIME as the server's suspend check reads them.
    init(source: ScriptedVBlankSource,
         clocks: (@Sendable () -> (monotonicNs: UInt64, boottimeNs: UInt64))? = nil) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("vsyncd-inproc-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        socketPath = directory.appendingPathComponent("s.sock").path
        var fds: [Int32] = [0, 0]
        pipe(&fds)
        stopWrite = fds[1]
        var logger = Logger(label: "vsyncd-test")
        logger.logLevel = .critical
        let listener = try ListeningSocket.bind(path: socketPath)
        // The server owns the pipe's read end from here (its loop's stop signal) and closes it.
        let server = try Server(configuration: DaemonConfiguration(), source: source, listener: listener,
                                notifier: nil, signals: FileDescriptor(fds[0]), logger: logger)
        if let clocks { server.displays.suspendClocks = clocks }
        let box = ServerBox(server: server)
        Thread.detachNewThread { [done] in
            try? box.server.run()
            done.signal()
        }
    }

    func stop() {
        var signo = UInt32(SIGTERM)
        _ = write(stopWrite, &signo, 4)
        done.wait()
        close(stopWrite)
        try? FileManager.default.removeItem(at: directory)
    }
}

private final class ServerBox: @unchecked Sendable {
    let server: Server
    init(server: Server) { self.server = server }
}

extension VsyncdTests {
    @Suite("vsyncd display changes (scripted source)") struct DisplayChanges {
        static let key = DisplayKey(device: "/dev/dri/card0", crtcID: 40)
        static func virtual1(hz: Double, active: Bool = true) -> SourceDisplay {
            SourceDisplay(key: key, connectorID: 41, connectorName: "Virtual-1", deviceName: "card0",
                          isActive: active, refresh: RefreshRate(hertz: hz), width: 1024, height: 768)
        }

        /// Pushes vblanks `range` at `hz` starting at `start` ns and returns the next timestamp.
        static func vblanks(_ source: ScriptedVBlankSource, _ range: ClosedRange<UInt64>, hz: Double, start: UInt64) -> UInt64 {
            let period = 1e9 / hz
            var ts = start
            var events: [ScriptedVBlankSource.Scripted] = []
            for seq in range {
                events.append(.vblank(key, sequence: seq, timestampNs: ts))
                ts += UInt64(period.rounded())
            }
            source.push(events)
            return ts
        }

        @Test func kernelTimestampsModeChangeOffOnAndRemoval() throws {
            let source = ScriptedVBlankSource(displays: [Self.virtual1(hz: 60)])
            let daemon = try InProcessDaemon(source: source)
            defer { daemon.stop() }
            let client = try RawClient(path: daemon.socketPath)
            try client.handshake()
            #expect(!source.isActive(Self.key))  // nobody listening: no vblank requests
            let sub = try client.subscribe(1, fps: 30, selector: .connector("Virtual-1"))
            #expect(sub.divisor == 2)
            #expect(sub.display.crtcID == 40 && sub.display.flags.contains(.hardwareClock))
            #expect(source.isActive(Self.key))

            // Ticks carry the kernel's timestamps, on even sequences.
            let start: UInt64 = 5_000_000_000
            var next = Self.vblanks(source, 100...111, hz: 60, start: start)
            var ticks: [Tick] = []
            while ticks.count < 6, let t = client.nextTick() { ticks.append(t) }
            #expect(ticks.map(\.sequence) == [100, 102, 104, 106, 108, 110])
            for t in ticks {
                #expect(t.timestampNs == start + (t.sequence - 100) * 16_666_667)
                #expect(t.flags == .hardwareTimestamp)
                #expect(abs(Int64(t.targetTimestampNs) - Int64(t.timestampNs) - 33_333_334) < 1_000)
            }

            // Mode change to 144 Hz, noticed from the vblank interval alone.
            // The CRTC is re-read once the ticks of the read that showed the odd interval are
            // out: vblanks after that (the next read) are on the new mode.
            source.update { $0[0] = Self.virtual1(hz: 144) }
            next = Self.vblanks(source, 112...113, hz: 144, start: next)
            var afterChange = client.messages { if case .displayEvent(let e) = $0 { e.kind == .modeChanged } else { false } }
            next = Self.vblanks(source, 114...140, hz: 144, start: next)
            afterChange += client.messages { if case .tick(let t) = $0 { t.divisor == 5 } else { false } }
            let event = afterChange.compactMap { if case .displayEvent(let e) = $0 { e } else { nil } }.first
            #expect(event?.kind == .modeChanged)
            #expect(event?.display.refreshMillihertz == 144_000)
            let resubscribed = afterChange.compactMap { if case .subscribed(let s) = $0 { s } else { nil } }.first
            #expect(resubscribed?.divisor == 5)  // 30 fps at 144 Hz: 28.8
            guard case .tick(let fast)? = afterChange.last else { Issue.record("no tick at the new rate"); return }
            #expect(fast.sequence % 5 == 0)
            let period144: Double = 1e9 / 144
            #expect(abs(Double(fast.displayIntervalNs) - period144) < period144 * 0.01)

            // Off: the wait fails with EINVAL.
            source.update { $0[0] = Self.virtual1(hz: 144, active: false) }
            source.push([.failed(Self.key, .off)])
            let offMessages = client.messages { if case .displayEvent(let e) = $0 { e.kind == .off } else { false } }
            guard case .displayEvent(let off)? = offMessages.last else { Issue.record("no off event"); return }
            #expect(off.display.state == .off)

            // On again: found by the 500 ms poll.
            source.update { $0[0] = Self.virtual1(hz: 60) }
            let onMessages = client.messages { if case .displayEvent(let e) = $0 { e.kind == .on } else { false } }
            guard case .displayEvent(let on)? = onMessages.last else { Issue.record("no on event"); return }
            #expect(on.display.state == .on && on.display.refreshMillihertz == 60_000)
            // Vblank events are asked for again as the display turns on (after the event is sent).
            #expect(waitUntil(timeout: 1) { source.isActive(Self.key) })

            // Pause: the daemon stops asking for vblanks.
            client.send(.pause(subscriptionID: 1))
            usleep(100_000)
            #expect(!source.isActive(Self.key))
            client.send(.resume(subscriptionID: 1))
            usleep(100_000)
            #expect(source.isActive(Self.key))

            // A second card appears, then the first goes away.
            let other = SourceDisplay(key: DisplayKey(device: "/dev/dri/card1", crtcID: 50), connectorID: 51,
                                      connectorName: "HDMI-A-1", deviceName: "card1", isActive: true,
                                      refresh: RefreshRate(hertz: 75), width: 1920, height: 1080)
            source.update { $0.append(other) }
            source.push([.devicesChanged])
            let added = client.messages { if case .displayEvent(let e) = $0 { e.kind == .added } else { false } }
            guard case .displayEvent(let addedEvent)? = added.last else { Issue.record("no added event"); return }
            #expect(addedEvent.display.connectorName == "HDMI-A-1" && addedEvent.display.deviceName == "card1")

            source.update { $0.removeAll { $0.key == Self.key } }
            source.push([.devicesChanged])
            let removed = client.messages { if case .displayEvent(let e) = $0 { e.kind == .removed } else { false } }
            guard case .displayEvent(let removedEvent)? = removed.last else { Issue.record("no removed event"); return }
            #expect(removedEvent.display.connectorName == "Virtual-1")
            // Its subscription is gone with it.
            client.send(.pause(subscriptionID: 1))
            guard case .message(.error(let e)) = client.receive() else { Issue.record("no ERROR"); return }
            #expect(e.code == .unknownSubscription)

            // A CRTC lit later on an open card raises no event; asking for the list finds it.
            let late = SourceDisplay(key: DisplayKey(device: "/dev/dri/card1", crtcID: 60), connectorID: 61,
                                     connectorName: "DP-2", deviceName: "card1", isActive: true,
                                     refresh: RefreshRate(hertz: 120), width: 800, height: 600)
            source.update { $0.append(late) }
            usleep(600_000)  // rescans are rate-limited to two a second
            client.send(.listDisplays)
            let listed = client.messages { if case .displayList = $0 { true } else { false } }
            guard case .displayList(let list)? = listed.last else { Issue.record("no list"); return }
            #expect(list.map(\.connectorName).sorted() == ["DP-2", "HDMI-A-1"])
            #expect(listed.contains { if case .displayEvent(let e) = $0 { e.kind == .added } else { false } })
            _ = next
        }
    }
}
