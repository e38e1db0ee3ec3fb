import Foundation
import Testing
import VsyncCore

/// `vsync-probe page`, the page-only client, against the real vsyncd on its timer source, whose
/// vblank n is at epoch + n·period exactly: every read is checked against that grid.
extension DisplayLinkTests.Daemon {
    struct PageRead: Decodable {
        var readNs: UInt64
        var generation: UInt32
        /// Absent while the display is not measured yet (no period on the page).
        var nextSequence: UInt64?
        var nextTimestampNs: UInt64?
        var periodNs: Double
        var lastSequence: UInt64
        var lastTimestampNs: UInt64
        var lastAgeUs: Double
        var flags: [String]
    }

    static func pageReads(_ stdout: String) -> [PageRead] {
        stdout.split(separator: "\n").filter { $0.hasPrefix("{\"readNs\"") }
            .compactMap { try? JSONDecoder().decode(PageRead.self, from: Data($0.utf8)) }
    }

    /// Each read's prediction: the first vblank after the read, on the grid of the record's last
    /// real vblank (the timer's grid, to 1 µs).
    static func expectOnTheGrid(_ reads: [PageRead], periodNs: Double) {
        for r in reads {
            guard let next = r.nextSequence, let nextNs = r.nextTimestampNs else { continue }
            let frames = Double(next - r.lastSequence)
            let grid = Double(r.lastTimestampNs) + frames * periodNs
            #expect(abs(Double(nextNs) - grid) < 1_000, "read at \(r.readNs): next \(next) off the grid by \(Double(nextNs) - grid) ns")
            #expect(nextNs > r.readNs && Double(nextNs - r.readNs) <= periodNs + 1, "read at \(r.readNs): next at \(nextNs)")
        }
    }

    /// Continuous sampling: the page-only client gets no tick, yet its reads see the record move
    /// with every vblank, lit and current, and the summary counts what was printed.
    @Test func pageReadsTheRecordWithoutTicks() async throws {
        let daemon = try DaemonProcess(hertz: 60, logLevel: "warning")
        defer { daemon.stop() }
        let result = try runProbe(["page", "--socket", daemon.socketPath, "--reads", "30", "--interval", "20", "--json"], timeout: 20)
        #expect(result.status == 0, "stderr: \(result.stderr)")
        let reads = Self.pageReads(result.stdout)
        try #require(reads.count == 30, "\(result.stdout)")
        #expect(!result.stdout.contains("\"seq\""), "a page-only client printed a tick")
        #expect(reads.allSatisfy { $0.flags.contains("lit") && $0.flags.contains("synthetic") })
        // The first reads may come before the daemon had the display's first vblanks since this
        // client followed it: not current, not yet measured. From the first measured read on,
        // every one is both.
        let measured = Array(reads.drop { $0.nextSequence == nil || !$0.flags.contains("current") })
        #expect(measured.count >= 25, "\(reads.map(\.flags))")
        #expect(measured.allSatisfy { $0.flags.contains("current") && abs($0.periodNs - 1e9 / 60) < 1 }, "\(measured.map(\.flags)) \(measured.map(\.periodNs))")
        Self.expectOnTheGrid(reads, periodNs: 1e9 / 60)
        // 30 reads 20 ms apart span about 36 vblanks: the record moved with them.
        #expect(reads.last!.lastSequence > reads.first!.lastSequence, "the record's last vblank did not move")
        let summary = try #require(result.stdout.split(separator: "\n").last.flatMap {
            try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        })
        #expect(summary["summary"] as? Bool == true && summary["reads"] as? Int == 30, "\(summary)")
        #expect(summary["current"] as? Int == reads.filter { $0.flags.contains("current") }.count, "\(summary)")
    }

    /// Sparse sampling with a page-only client alone: once warm its display is model-timed, the
    /// record stays current between bursts with its last real vblank at most a burst interval
    /// (and a slow read) old, and every prediction lies on the timer's grid.
    @Test func pageStaysCurrentBetweenBursts() async throws {
        let daemon = try DaemonProcess(hertz: 60, extra: ["--vblank-sampling", "sparse"], logLevel: "warning")
        defer { daemon.stop() }
        let result = try runProbe(["page", "--socket", daemon.socketPath, "--reads", "120", "--interval", "50", "--json"], timeout: 40)
        #expect(result.status == 0, "stderr: \(result.stderr)")
        let reads = Self.pageReads(result.stdout)
        try #require(reads.count == 120, "\(result.stdout)")
        let warm = reads.drop { !$0.flags.contains("modelTimed") }
        let lastVBlanks = Set(warm.map(\.lastSequence))
        print("vsync-probe page on sparse sampling, timer:60: \(warm.count) of \(reads.count) reads model-timed, \(lastVBlanks.count) distinct last vblanks in them, oldest \(Int((warm.map(\.lastAgeUs).max() ?? 0) / 1000)) ms")
        #expect(warm.count >= 60, "\(warm.count) reads after the display became model-timed")
        #expect(warm.allSatisfy { $0.flags.contains("lit") && $0.flags.contains("current") }, "\(warm.map(\.flags))")
        // Bursts went on (the page-only subscription alone arms them) and the interrupt slept
        // between them: the last real vblank moves in steps, not with every read.
        #expect(lastVBlanks.count >= 2 && lastVBlanks.count * 3 <= warm.count, "\(lastVBlanks.sorted())")
        let bound = Double(VBlankSampling.burstIntervalNs) / 1000 + 1_000_000
        #expect(warm.allSatisfy { $0.lastAgeUs <= bound }, "\(warm.map(\.lastAgeUs).max() ?? 0) µs")
        Self.expectOnTheGrid(Array(reads), periodNs: 1e9 / 60)
    }

    @Test func pageWithoutADaemonFailsInOneLine() throws {
        let result = try runProbe(["page", "--socket", "/nonexistent/vsyncd.sock", "--reads", "1"], timeout: 10)
        #expect(result.status == 1)
        #expect(result.stderr.split(separator: "\n").count == 1 && result.stderr.hasPrefix("vsync-probe: "), "\(result.stderr)")
    }
}
