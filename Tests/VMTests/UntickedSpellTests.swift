import Testing

/// `TickCheck.longestUntickedSpell`, which the VM tests' "untouched" bounds rest on, on made-up
/// records (no VM): it must count the daemon's missed vblanks and never the kernel's own pauses.
struct UntickedSpellTests {
    static let period: UInt64 = 16_666_667

    /// A kernel record of vblanks `sequences` on an exact 60 Hz grid.
    static func record(_ sequences: [UInt64]) -> KernelRecord {
        KernelRecord(sequences.map { "\($0) \($0 * period)" })
    }

    static func ticks(_ sequences: [UInt64]) -> [FollowTick] {
        sequences.map {
            FollowTick(seq: $0, timestampNs: $0 * period, targetTimestampNs: ($0 + 1) * period, durationNs: period,
                       skipped: 0, flags: ["hardware"], latencyUs: 500)
        }
    }

    @Test func vblanksTheClientDidNotGetMakeASpellToItsNextTick() {
        let kernel = Self.record(Array(0...200))
        let client = Self.ticks(Array(0...99) + Array(110...200))
        let spell = TickCheck.longestUntickedSpell(client, kernel: kernel, from: 0, to: 200 * Self.period)
        #expect(spell.ns == 10 * Self.period && spell.vblanks == 10 && spell.startNs == 100 * Self.period)
        #expect(spell.totalNs == spell.ns && spell.guestHeldNs == 0)
    }

    @Test func whatTheGuestHeldEveryReaderUpForIsNotTheClients() {
        // The recorder read vblanks 100...105 only at vblank 106's time: the guest ran nothing
        // for 6 frames. The client's spell of 10 frames is 4 of its own.
        let lines = (0...200).map { (s: UInt64) in "\(s) \(s * Self.period) \((100...105).contains(s) ? 106 * Self.period : s * Self.period + 1_000)" }
        let client = Self.ticks(Array(0...99) + Array(110...200))
        let spell = TickCheck.longestUntickedSpell(client, kernel: KernelRecord(lines), from: 0, to: 200 * Self.period)
        #expect(spell.totalNs == 10 * Self.period && spell.guestHeldNs == 6 * Self.period && spell.ns == 4 * Self.period)
    }

    @Test func aPauseOfTheKernelsOwnIsNoSpell() {
        // The kernel's count jumped from 100 to 131 (its vblank timer a half second late): the
        // client ticked every vblank there was.
        let sequences: [UInt64] = Array(0...100) + Array(131...200)
        let spell = TickCheck.longestUntickedSpell(Self.ticks(sequences), kernel: Self.record(sequences), from: 0, to: 200 * Self.period)
        #expect(spell.totalNs == 0 && spell.vblanks == 0)
    }

    @Test func theKernelsOwnPauseInsideASpellIsNoTimeATickWasDue() {
        // The client missed 96...100 and 131...139; between them the kernel's count jumped
        // from 100 to 131 with no event: 14 frames of the 44 without a tick were due.
        let sequences: [UInt64] = Array(0...100) + Array(131...200)
        let client = Self.ticks(Array(0...95) + Array(140...200))
        let spell = TickCheck.longestUntickedSpell(client, kernel: Self.record(sequences), from: 0, to: 200 * Self.period)
        #expect(spell.totalNs == 44 * Self.period && spell.framesNs == 14 * Self.period && spell.ns == 14 * Self.period && spell.vblanks == 14)
    }

    @Test func aClientThatStopsTickingMakesASpellAsLongAsTheRecord() {
        let kernel = Self.record(Array(0...200))
        let spell = TickCheck.longestUntickedSpell(Self.ticks(Array(0...50)), kernel: kernel, from: 0, to: 200 * Self.period)
        #expect(spell.ns == 149 * Self.period && spell.vblanks == 150)
    }

    @Test func onlyTheWindowCountsAndATickTheRecordLacksEndsASpell() {
        let kernel = Self.record(Array(0...60) + Array(62...200))  // the recorder missed 61
        let client = Self.ticks(Array(0...9) + Array(30...50) + [61] + Array(70...200))
        // 10...29 lies before the window; 51...60 ends at the tick of 61, 62...69 at 70's.
        let spell = TickCheck.longestUntickedSpell(client, kernel: kernel, from: 40 * Self.period, to: 200 * Self.period)
        #expect(spell.ns == 10 * Self.period && spell.vblanks == 10 && spell.startNs == 51 * Self.period)
    }
}
