import Foundation
import Testing

/// `vsync_link_set_hardware_ticks` through the real libvsync.so against the real vsyncd sampling
/// vblanks sparsely (timer source, 60 Hz): Tests/libvsync/hardware-ticks-check.c runs a link with
/// hardware ticks next to one without, then turns them off and on again on the running link.
@Suite("libvsync hardware ticks", .serialized)
struct LibvsyncHardwareTicksTests {
    /// The "NAME key=value ..." line of hardware-ticks-check's phase NAME, as numbers.
    static func phase(_ name: String, _ output: String) -> [String: Int] {
        guard let line = output.split(separator: "\n").first(where: { $0.hasPrefix(name + " ") }) else { return [:] }
        var fields: [String: Int] = [:]
        for part in line.split(separator: " ").dropFirst() {
            let kv = part.split(separator: "=", maxSplits: 1)
            if kv.count == 2, let n = Int(kv[1]) { fields[String(kv[0])] = n }
        }
        return fields
    }

    /// While the link with hardware ticks runs, the display's vblank events stay on: no frame of
    /// either link is model-timed over 2.5 s, longer than the model's learning and a burst
    /// interval (without it most are: `VsyncdTests.SparseSampling`). Turned off on the running
    /// link, the events sleep and both links get model-timed frames; on again, none.
    @Test(.timeLimit(.minutes(1)))
    func hardwareTicksKeepTheDisplaysVBlankEventsOnUntilTurnedOff() throws {
        let daemon = try DaemonProcess(hertz: 60, extra: ["--vblank-sampling", "sparse"])
        defer { _ = daemon.stop() }
        let dir = try LibvsyncTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let check = dir.appendingPathComponent("hardware-ticks-check").path
        try LibvsyncTests.compile(LibvsyncTests.repository.appendingPathComponent("Tests/libvsync/hardware-ticks-check.c"), to: check)
        let result = try Command.run([check, daemon.socketPath])
        #expect(result.status == 0 && result.output.contains("done failures=0"), "\(result.output)")
        #expect(!result.output.contains("FAIL"), "\(result.output)")

        let on = Self.phase("on", result.output)
        #expect(on["p"] == 150 && (on["h"] ?? 0) >= 145, "\(result.output)")
        #expect(on["h_model"] == 0 && on["p_model"] == 0, "\(result.output)")

        let off = Self.phase("off", result.output)
        #expect((off["h_model"] ?? 0) > 0 && (off["p_model"] ?? 0) > 0, "\(result.output)")

        let again = Self.phase("again", result.output)
        #expect(again["settled"] == 1, "\(result.output)")
        #expect(again["p"] == 150 && (again["h"] ?? 0) >= 145, "\(result.output)")
        #expect(again["h_model"] == 0 && again["p_model"] == 0, "\(result.output)")
    }
}
