import Foundation
import Testing
import VsyncCore
@testable import VsyncDRM

/// Names, encodings and mode conversions: the parts of the DRM layer that need no device.
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

    /// Writes events as the kernel lays them out (<drm/drm.h>): a `drm_event` header, then the body.
    private static func event(type: UInt32, length: UInt32 = 32, userData: UInt64, a: UInt64, b: UInt64) -> [UInt8] {
        var bytes: [UInt8] = []
        func put<T: FixedWidthInteger>(_ v: T) { withUnsafeBytes(of: v.littleEndian) { bytes += $0 } }
        put(type); put(length); put(userData); put(a); put(b)
        bytes += [UInt8](repeating: 0, count: max(0, Int(length) - 32))
        return bytes
    }

    private static func decode(_ bytes: [UInt8]) -> [RawVBlank] {
        var out: [RawVBlank] = []
        bytes.withUnsafeBytes { Card.decodeEvents($0) { out.append($0) } }
        return out
    }

    @Test func decodesBothVBlankEventKindsAndSkipsOthers() {
        let userData = VBlankEvent.userData(pipe: 2, token: 0x0003_0007)
        // drm_event_vblank: tv_sec 5, tv_usec 250, sequence 0xFFFF_FFFE, crtc_id 41.
        let legacy = Self.event(type: 0x01, userData: userData, a: 5 | 250 << 32, b: 0xFFFF_FFFE | 41 << 32)
        // A page flip (type 2), 40 bytes long: skipped by its length.
        let flip = Self.event(type: 0x02, length: 40, userData: 9, a: 1, b: 1)
        // drm_event_crtc_sequence: time_ns, sequence.
        let sequence = Self.event(type: 0x03, userData: userData, a: 123_456_789, b: 1 << 40)
        let raws = Self.decode(legacy + flip + sequence)
        #expect(raws == [
            RawVBlank(userData: userData, sequence: 0xFFFF_FFFE, timestampNs: 5_000_250_000, isLegacy: true),
            RawVBlank(userData: userData, sequence: 1 << 40, timestampNs: 123_456_789, isLegacy: false),
        ])
        #expect(raws[0].userData >> 32 == 2 && UInt32(truncatingIfNeeded: raws[0].userData) == 0x0003_0007,
                "the pipe and the token come back whole")
    }

    @Test func stopsAtAHeaderThatDoesNotFit() {
        let good = Self.event(type: 0x03, userData: 1, a: 10, b: 20)
        var bad = Self.event(type: 0x03, userData: 2, a: 11, b: 21)
        bad[4] = 200  // says 200 bytes, has 32
        #expect(Self.decode(good + bad).map(\.userData) == [1])
        #expect(Self.decode(good + Array(good.prefix(12))).map(\.userData) == [1], "a partial header is not read")
        var zero = good
        zero[4] = 0  // length 0 would loop forever
        #expect(Self.decode(zero + good).isEmpty)
    }
}
