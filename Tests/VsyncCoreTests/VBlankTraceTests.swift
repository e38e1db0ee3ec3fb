import Testing
@testable import VsyncCore

@Suite("Trace line format")
struct VBlankTraceTests {
    static let sample = VBlankTrace(
        comments: ["recorded by a test; synthetic: yes"],
        displays: [.init(id: 1, device: "/dev/dri/card0", crtcID: 45, connector: "Virtual-1")],
        events: [
            .mode(timeNs: 100, display: 1, width: 1024, height: 768, refresh: RefreshRate(numerator: 78125, denominator: 1302)),
            .vblank(display: 1, sequence: 7, timestampNs: 1_000),
            .vblank(display: 1, sequence: 8, timestampNs: 16_666_600),
            .off(timeNs: 20_000_000, display: 1),
        ])

    @Test func roundTrip() throws {
        let text = Self.sample.text
        #expect(text.hasPrefix("vsync-trace 2\n# recorded by a test"))
        #expect(text.contains("\nmode 100 1 1024x768 78125/1302\nvblank 1 7 1000\n"))
        #expect(try VBlankTrace(parsing: text) == Self.sample)
    }

    /// Version 2's VRR lines round-trip; version 1 traces (no such lines) still read.
    @Test func variableRefreshLinesAndVersion1Traces() throws {
        let trace = VBlankTrace(displays: [.init(id: 1, device: "/dev/dri/card0", crtcID: 80, connector: "DP-1")], events: [
            .variableRefreshCapable(timeNs: 5, display: 1, true),
            .refreshRange(timeNs: 5, display: 1, EDIDRefreshRange(minimumHz: 48, maximumHz: 360)),
            .refreshRange(timeNs: 6, display: 1, nil),
            .variableRefreshEnabled(timeNs: 7, display: 1, true),
            .vblank(display: 1, sequence: 9, timestampNs: 8),
        ])
        let text = trace.text
        #expect(text.contains("\nvrr-capable 5 1 1\nvrr-range 5 1 48 360\nvrr-range 6 1 0 0\nvrr-enabled 7 1 1\n"))
        #expect(try VBlankTrace(parsing: text) == trace)
        let old = try VBlankTrace(parsing: "vsync-trace 1\ndisplay 1 c 1 x\nmode 5 1 1024x768 60/1\nvblank 1 1 50\n")
        #expect(old.events.count == 2)
    }

    @Test func newerKindsAreSkippedAndBlankLinesIgnored() throws {
        let text = "vsync-trace 1\r\n\ndisplay 2 card0 9 HDMI-A-1\nvrr 5 2 on\nvblank 2 1 50\n"
        let trace = try VBlankTrace(parsing: text)
        #expect(trace.events == [.vblank(display: 2, sequence: 1, timestampNs: 50)])
    }

    @Test("malformed traces are refused with the line and the reason",
          arguments: [
            ("", 1, "empty"),
            ("vsync-trace 3\n", 1, "newer"),
            ("vsync-trace 2\ndisplay 1 c 1 x\nvrr-enabled 5 1 2\n", 3, "0|1"),
            ("vsync-trace 2\ndisplay 1 c 1 x\nvrr-range 5 1 144 48\n", 3, "MIN_HZ"),
            ("not a trace\n", 1, "first line"),
            ("vsync-trace 1\nvblank 1 2 3\n", 2, "before its 'display' line"),
            ("vsync-trace 1\ndisplay 1 c 1 x\nvblank 1 two 3\n", 3, "a sequence"),
            ("vsync-trace 1\ndisplay 1 c 1 x\nmode 5 1 1024x768 60/0\n", 3, "NUM/DEN"),
            ("vsync-trace 1\ndisplay 1 c 1 x\ndisplay 1 c 2 y\n", 3, "twice"),
          ])
    func malformed(text: String, line: Int, reason: String) {
        #expect {
            try VBlankTrace(parsing: text)
        } throws: { error in
            guard let e = error as? VBlankTrace.ParseError else { return false }
            return e.line == line && e.reason.contains(reason)
        }
    }
}
