import CVsyncPageMaker
import Glibc
import Testing
import VsyncClientCore
import VsyncCore

/// The seqlock under a writer that never stops: a reader through `vsync_page_read` never keeps
/// a record mixed from two writes, where a reader without the lock does. Every field of write c
/// is a function of c (`pm_values_for`), so a mixed copy breaks an equation.
@Suite(.serialized) struct TimingPageTortureTests {
    static let reads = 1_000_000
    static let displayID: UInt32 = 7

    /// The checker itself catches a mix: one field from the next write is enough.
    @Test func theCheckerCatchesAMixedRecord() {
        var v = vsync_page_values()
        pm_values_for(41, Self.displayID, &v)
        #expect(pm_values_consistent(&v, Self.displayID) == 1)
        var next = vsync_page_values()
        pm_values_for(42, Self.displayID, &next)
        v.updated_ns = next.updated_ns
        #expect(pm_values_consistent(&v, Self.displayID) == 0)
    }

    /// 1 kHz (the daemon's rate at 1000 Hz) and back to back: 10⁶ locked reads each, none mixed.
    @Test(arguments: [UInt64(1_000_000), 0]) func lockedReadsNeverSeeAMixedRecord(periodNs: UInt64) throws {
        let page = try TestPage()
        guard let writer = pm_writer_start(page.page, 4, Self.displayID, periodNs) else {
            Issue.record("no writer thread")
            return
        }
        // Wait for the writer's first writes (an event, not a sleep): the reads overlap writing.
        while pm_writer_writes(writer) < 2 { sched_yield() }
        var v = vsync_page_values()
        var mixed = 0, busy = 0, good = 0
        var lastSeen: UInt64 = 0, goingBack = 0
        let writesBefore = pm_writer_writes(writer)
        // At least 10⁶ reads, and on until the writer made enough writes to overlap them (a
        // fast machine reads 10⁶ times in fewer ms than 1 kHz writes 100 times); at most 10 s.
        let minimumWrites: UInt64 = periodNs == 0 ? 10_000 : 100
        let end = Core.now() + 10_000_000_000
        var reads = 0
        while reads < Self.reads || (pm_writer_writes(writer) - writesBefore < minimumWrites && Core.now() < end) {
            reads += 1
            if vsync_page_read(page.page, 4, &v, 1000) != 0 { busy += 1; continue }
            if pm_values_consistent(&v, Self.displayID) == 0 { mixed += 1; continue }
            if v.last_sequence < lastSeen { goingBack += 1 }
            lastSeen = v.last_sequence
            good += 1
        }
        let writesDuring = pm_writer_writes(writer) - writesBefore
        let total = pm_writer_stop(writer)
        #expect(mixed == 0, "\(mixed) mixed records of \(reads) locked reads")
        #expect(goingBack == 0, "a read saw an older write than the one before it")
        // The writer really wrote while the reads ran (else the test proves nothing).
        #expect(writesDuring >= minimumWrites, "only \(writesDuring) writes during the reads")
        // Back to back, the lock word is odd most of the time: some reads give up (EAGAIN); most succeed.
        #expect(good > reads / 10, "\(good) good, \(busy) gave up, \(total) writes")
        if periodNs != 0 { #expect(busy == 0) }
    }

    /// Reading the same record without the lock does see mixes: the locked test above could fail.
    @Test func readsWithoutTheLockSeeMixedRecords() throws {
        let page = try TestPage()
        guard let writer = pm_writer_start(page.page, 4, Self.displayID, 0) else {
            Issue.record("no writer thread")
            return
        }
        while pm_writer_writes(writer) < 2 { sched_yield() }
        var v = vsync_page_values()
        var mixed = 0, reads = 0
        let end = Core.now() + 10_000_000_000
        // Until the first few mixes, or 10 s (two shared cores: the threads may rarely overlap).
        while mixed < 3 && Core.now() < end {
            for _ in 0..<10_000 {
                pm_read_unlocked(page.page, 4, &v)
                if pm_values_consistent(&v, Self.displayID) == 0 { mixed += 1 }
            }
            reads += 10_000
        }
        _ = pm_writer_stop(writer)
        #expect(mixed > 0, "no mixed record in \(reads) unlocked reads")
    }

    /// Through the client core, with the writer back to back: every answer consistent or `torn`.
    @Test func theCoreReadsConsistentRecordsUnderAWriter() throws {
        let server = ScriptedServer()
        let client = try Core.client(server)
        _ = client.subscribe(.primary, range: .default)
        let page = try TestPage()
        guard let writer = pm_writer_start(page.page, 4, Self.displayID, 0) else {
            Issue.record("no writer thread")
            return
        }
        Core.welcome(client, server, page: page)
        var mixed = 0, good = 0, torn = 0
        for _ in 0..<100_000 {
            do {
                let t = try client.displayTiming(displayID: Self.displayID)
                let c = t.lastSequence
                if t.anchorNs != c &* 7 &+ 3 || t.updatedNs != c &* 29 &+ 9 || t.generation != UInt32(truncatingIfNeeded: c) {
                    mixed += 1
                } else { good += 1 }
            } catch { torn += 1 }
        }
        _ = pm_writer_stop(writer)
        #expect(mixed == 0)
        #expect(good > 10_000, "\(good) good, \(torn) torn")
    }
}

/// The page's seals (PROTOCOL.md § 10): nobody holding the descriptor can change what others read.
@Suite struct TimingPageSealTests {
    @Test func theSealedMemfdRefusesWritesMappingsAndResizes() throws {
        let page = try TestPage()
        #expect(pm_get_seals(page.fd) == PM_ALL_SEALS)
        #expect(pm_try_map_writable(page.fd) == -EPERM)
        #expect(pm_try_write(page.fd) == -EPERM)
        #expect(pm_try_truncate(page.fd, 8192) == -EPERM)
        #expect(pm_try_truncate(page.fd, 0) == -EPERM)
        #expect(pm_add_seals(page.fd, PM_F_SEAL_SHRINK) == -EPERM)
        // The unsealed file allows all of it: the seals, not something else, refuse.
        let open = try TestPage(seals: 0)
        #expect(pm_try_map_writable(open.fd) == 0)
        #expect(pm_try_write(open.fd) == 0)
        #expect(pm_try_truncate(open.fd, 8192) == 0)
    }
}
