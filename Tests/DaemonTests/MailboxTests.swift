@testable import DisplayLink
import Testing

/// The one mailbox every delivery context of a link uses (run loop, queue, reader thread, stream).
@Suite("DisplayLink mailbox")
struct MailboxTests {
    static func frame(_ sequence: UInt64, skipped: Int = 0) -> DisplayLink.Frame {
        DisplayLink.Frame(timestampNanoseconds: sequence * 1000, targetTimestampNanoseconds: sequence * 1000 + 1000,
                          durationNanoseconds: 1000, sequence: sequence, skipped: skipped, flags: [],
                          receivedNanoseconds: 0)
    }

    @Test func aNewerFrameReplacesThePendingOneAndCountsItSkipped() {
        var box = Mailbox()
        let wakes = [box.put(Self.frame(10)), box.put(Self.frame(11, skipped: 2)), box.put(Self.frame(14, skipped: 1))]
        #expect(wakes == [true, false, false], "only the first put wakes the context")
        let taken = box.take()
        // 14 (own skipped 1) replaced 11 (2 + itself) which had replaced 10 (itself): 1 + 3 + 1.
        #expect(taken.frame?.sequence == 14)
        #expect(taken.frame?.skipped == 5)
        #expect(box.isEmpty)
        let wakesAgain = box.put(Self.frame(15))
        #expect(wakesAgain, "after a take the next put wakes the context again")
    }

    @Test func eventsQueueInOrderBesideTheFrameAndPauseDropsOnlyTheFrame() {
        var box = Mailbox()
        let wakes = [box.post(.change(.off)), box.put(Self.frame(3)), box.post(.change(.on))]
        #expect(wakes == [true, false, false])
        box.dropFrame()
        let taken = box.take()
        #expect(taken.frame == nil)
        guard taken.events.count == 2, case .change(.off) = taken.events[0], case .change(.on) = taken.events[1] else {
            Issue.record("events out of order or lost: \(taken.events)")
            return
        }
    }

    @Test func aReplacedWakeUpIsRequestedAgainOnlyWhenSomethingWaits() {
        var box = Mailbox()
        let idle = box.repoke()
        #expect(!idle, "nothing waiting: no wake-up")
        _ = box.put(Self.frame(1))
        let waiting = box.repoke()
        #expect(waiting, "a frame waits and the old wake-up is gone: wake again")
        let again = box.put(Self.frame(2))
        #expect(!again, "the new wake-up is on its way")
    }
}
