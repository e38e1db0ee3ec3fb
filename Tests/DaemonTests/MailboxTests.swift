@testable import DisplayLink
import Dispatch
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

    @Test func aPassedFrameSkipsLikeAPutAndTakesTheWaitingEvents() {
        var box = Mailbox()
        _ = box.post(.change(.off))
        _ = box.put(Self.frame(7, skipped: 1))
        // 9 (own skipped 0) passes the pending 7 (1 + itself): what a put then a take would give.
        let passed = box.pass(Self.frame(9))
        #expect(passed.frame.sequence == 9)
        #expect(passed.frame.skipped == 2)
        guard passed.events.count == 1, case .change(.off) = passed.events[0] else {
            Issue.record("the waiting event was lost: \(passed.events)")
            return
        }
        #expect(box.isEmpty)
        let wakes = box.put(Self.frame(10))
        #expect(wakes, "nothing is on its way after a pass: the next put wakes the context")
        #expect(box.pass(Self.frame(11)).frame.skipped == 1)
    }

    /// The reader thread hands a frame straight to the handler only when it is the link's one
    /// context; with any other, every context gets the frame through `put`.
    @Test func onlyTheReaderThreadsOwnContextPassesAFrameStraightThrough() {
        let queue = DispatchQueue(label: "pass")
        var direct = DeliveryContexts()
        direct.direct = true
        #expect(direct.pass(Self.frame(1), inlineOn: nil)?.frame.sequence == 1)
        var inline = DeliveryContexts()
        inline.queue = queue
        #expect(inline.pass(Self.frame(2), inlineOn: queue)?.frame.sequence == 2)
        #expect(inline.pass(Self.frame(3), inlineOn: nil) == nil, "not inline: the queue is woken with async")
        #expect(inline.pass(Self.frame(4), inlineOn: DispatchQueue(label: "other")) == nil)
        var withStream = DeliveryContexts()
        withStream.direct = true
        withStream.streams[0] = DeliveryContexts.StreamRef(stream: nil)
        #expect(withStream.pass(Self.frame(5), inlineOn: nil) == nil, "a stream wants the frame too")
    }
}
