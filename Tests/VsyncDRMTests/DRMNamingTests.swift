import Foundation
import Testing
import VsyncCore
@testable import VsyncDRM

/// Names, encodings and mode conversions: the parts of the DRM layer that need no device.
// Serialized: two tests share the process-wide EventSink, and one checks its capacity.
@Suite(.serialized)
struct DRMNamingTests {
    @Test(arguments: [
        (UInt32(15), UInt32(1), "Virtual-1"),   // DRM_MODE_CONNECTOR_VIRTUAL
        (11, 1, "HDMI-A-1"),                    // DRM_MODE_CONNECTOR_HDMIA
        (10, 2, "DP-2"),                        // DRM_MODE_CONNECTOR_DisplayPort (kernel: "DP")
        (14, 1, "eDP-1"),
        (2, 3, "DVI-I-3"),
        (9, 1, "DIN-1"),                        // DRM_MODE_CONNECTOR_9PinDIN (kernel: "DIN")
        (20, 1, "USB-1"),
        (99, 1, "Unknown-1"),
    ])
    func connectorNamesMatchTheKernel(type: UInt32, index: UInt32, name: String) {
        let connector = Connector(id: 1, type: type, typeIndex: index, status: .connected,
                                  modes: [], encoderID: nil, crtcID: nil)
        #expect(connector.name == name)
    }

    @Test func legacyVBlankPipeEncoding() {
        #expect(Card.pipeBits(0) == 0)
        #expect(Card.pipeBits(1) == 0x2000_0000)          // DRM_VBLANK_SECONDARY
        #expect(Card.pipeBits(2) == 2 << 1)               // high-CRTC field, shift 1
        #expect(Card.pipeBits(5) == 5 << 1)
        #expect(Card.pipeBits(31) == 0x3e)                // the field's largest value
        for pipe in 2..<32 { #expect(Card.pipeBits(pipe) & ~UInt32(0x3e) == 0, "pipe \(pipe) leaks out of the mask") }
    }

    @Test func hertzTextKeepsSixDecimals() {
        #expect(Mode.hertzText(60.00384024577573) == "60.003840")
        #expect(Mode.hertzText(59.94005994005994) == "59.940060")
        #expect(Mode.hertzText(144) == "144.000000")
        #expect(Mode.hertzText(0.0000004) == "0.000000")
    }

    @Test func modeInfoRoundTripKeepsEveryTiming() throws {
        var timings = ModeTimings.custom(hertz: 75)
        timings.flags = ModeTimings.flagInterlace | 0x5  // +hsync +vsync
        timings.vscan = 2
        let mode = Card.mode(from: Card.modeInfo(from: timings))
        #expect(mode.timings == timings)
        #expect(mode.type == 0x20)  // DRM_MODE_TYPE_USERDEF
        #expect(mode.refreshRate == timings.refreshRate)
        #expect(mode.summary.hasPrefix("1024x768i "))
    }

    @Test func longModeNamesAreCutToTheKernelField() {
        var timings = ModeTimings.custom(hertz: 60)
        timings.name = String(repeating: "x", count: 64)
        let back = Card.mode(from: Card.modeInfo(from: timings))
        #expect(back.name == String(repeating: "x", count: 31), "DRM_DISPLAY_MODE_LEN is 32 with the NUL")
    }

    @Test func primaryNodesAreCardsInNumericOrder() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("dri-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        for name in ["card10", "renderD128", "card2", "card0", "cardX", "controlD64"] {
            _ = FileManager.default.createFile(atPath: dir.appendingPathComponent(name).path, contents: nil)
        }
        #expect(Card.primaryNodePaths(directory: dir.path) == ["card0", "card2", "card10"].map { "\(dir.path)/\($0)" })
        #expect(Card.primaryNodePaths(directory: dir.path + "/missing").isEmpty)
    }

    @Test func eventSinkHandsEachFdOnlyItsOwnEvents() {
        EventSink.record(RawEvent(fd: -7, serial: 1, sequence: 10, timestampNs: 100, isLegacy: false))
        EventSink.record(RawEvent(fd: -8, serial: 2, sequence: 20, timestampNs: 200, isLegacy: true))
        EventSink.record(RawEvent(fd: -7, serial: 3, sequence: 11, timestampNs: 110, isLegacy: false))
        var mine: [RawEvent] = [RawEvent(fd: -7, serial: 0, sequence: 0, timestampNs: 0, isLegacy: false)]
        EventSink.take(fd: -7, into: &mine)
        #expect(mine.map(\.serial) == [0, 1, 3], "appended after what the caller had, in order")
        mine.removeAll(keepingCapacity: true)
        EventSink.take(fd: -7, into: &mine)
        #expect(mine.isEmpty)
        EventSink.record(RawEvent(fd: -7, serial: 4, sequence: 12, timestampNs: 120, isLegacy: false))
        EventSink.discard(fd: -7)
        EventSink.take(fd: -8, into: &mine)
        #expect(mine.map(\.serial) == [2], "discarding one fd's events keeps the others'")
        mine.removeAll()
        EventSink.take(fd: -7, into: &mine)
        #expect(mine.isEmpty)
    }

    @Test func eventSinkKeepsItsCapacityAcrossReads() {
        var mine: [RawEvent] = []
        mine.reserveCapacity(8)
        EventSink.record(RawEvent(fd: -9, serial: 1, sequence: 1, timestampNs: 1, isLegacy: false))
        EventSink.take(fd: -9, into: &mine)
        let before = EventSink.buffer.withLock { $0.capacity }
        #expect(before >= 1)
        for round in 2...50 {
            mine.removeAll(keepingCapacity: true)
            EventSink.record(RawEvent(fd: -9, serial: UInt64(round), sequence: UInt64(round), timestampNs: 1, isLegacy: false))
            EventSink.take(fd: -9, into: &mine)
            #expect(mine.map(\.serial) == [UInt64(round)])
        }
        // The old take handed its buffer over, so every read copied it into a new allocation.
        #expect(EventSink.buffer.withLock { $0.capacity } == before)
        #expect(mine.capacity == 8)
    }
}
