import Glibc
import VsyncCore
import VsyncDRM

/// One vblank event as received: the kernel's sequence and timestamp, and when we woke for it.
struct VBlankSample: Sendable {
    var sequence: UInt64
    var timestampNs: UInt64
    var receivedNs: UInt64
}

/// Waits for vblanks one at a time the way a client would: queue the next, poll the fd,
/// read the event, queue again.
enum VBlankRecorder {
    static func record(card: Card, crtc: CRTC, frames: Int) throws(DRMError) -> [VBlankSample] {
        let clock = card.hasMonotonicTimestamps ? CLOCK_MONOTONIC : CLOCK_REALTIME
        // Generous: TCG guests and sleeping panels can be slow, but a dead CRTC must not hang us.
        let periodMs = crtc.mode?.refreshRate.map { 1000 / $0.hertz } ?? 100
        let timeoutMs = Int32(max(2000, 10 * periodMs))
        var samples: [VBlankSample] = []
        samples.reserveCapacity(frames)
        var token: UInt32 = 1
        try card.queueVBlank(crtc: crtc, token: token)
        var pfd = pollfd(fd: card.fileDescriptor, events: Int16(POLLIN), revents: 0)
        while samples.count < frames {
            pfd.revents = 0
            let ready = poll(&pfd, 1, timeoutMs)
            if ready < 0 {
                if errno == EINTR { continue }
                throw DRMError.from(errno: errno, device: card.path, operation: "poll")
            }
            if ready == 0 {
                throw DRMError(kind: .timedOut, errno: ETIMEDOUT, device: card.path, operation: "poll")
            }
            if pfd.revents & Int16(POLLERR | POLLHUP | POLLNVAL) != 0 {
                throw DRMError(kind: .deviceGone, errno: ENODEV, device: card.path, operation: "poll")
            }
            let received = now(clock)
            let events = try card.readEvents()
            guard !events.isEmpty else { continue }
            // Re-queue before bookkeeping so the next vblank is not missed.
            token &+= 1
            if samples.count + events.count < frames {
                try card.queueVBlank(crtc: crtc, token: token)
            }
            for event in events where samples.count < frames {
                samples.append(
                    VBlankSample(
                        sequence: event.sequence, timestampNs: event.timestampNs,
                        receivedNs: received))
            }
        }
        return samples
    }

    /// Records every target at once (`measure --all`): one vblank request in flight per CRTC, one
    /// poll over every card's fd, each event re-queued on its own CRTC, until every CRTC has
    /// `frames` samples. Samples are per target, in the order given.
    static func record(targets: [Target], frames: Int) throws(DRMError) -> [[VBlankSample]] {
        var samples = Array(repeating: [VBlankSample](), count: targets.count)
        let slowestMs = targets.map { $0.crtc.mode?.refreshRate.map { 1000 / $0.hertz } ?? 100 }.max() ?? 100
        let timeoutMs = Int32(max(2000, 10 * slowestMs))
        // The token is the target's index: it comes back in its events.
        for (i, target) in targets.enumerated() { try target.card.queueVBlank(crtc: target.crtc, token: UInt32(i)) }
        // Targets on one card share its fd: poll each card once.
        var cards: [Card] = []
        for target in targets where !cards.contains(where: { $0 === target.card }) { cards.append(target.card) }
        var pfds = cards.map { pollfd(fd: $0.fileDescriptor, events: Int16(POLLIN), revents: 0) }
        while samples.contains(where: { $0.count < frames }) {
            let ready = poll(&pfds, nfds_t(pfds.count), timeoutMs)
            if ready < 0 {
                if errno == EINTR { continue }
                throw DRMError.from(errno: errno, device: cards[0].path, operation: "poll")
            }
            if ready == 0 {
                let late = targets.indices.first { samples[$0].count < frames }!
                throw DRMError(kind: .timedOut, errno: ETIMEDOUT, device: targets[late].card.path, operation: "poll")
            }
            for (i, card) in cards.enumerated() where pfds[i].revents != 0 {
                if pfds[i].revents & Int16(POLLERR | POLLHUP | POLLNVAL) != 0 {
                    throw DRMError(kind: .deviceGone, errno: ENODEV, device: card.path, operation: "poll")
                }
                pfds[i].revents = 0
                let received = now(card.hasMonotonicTimestamps ? CLOCK_MONOTONIC : CLOCK_REALTIME)
                for event in try card.readEvents() {
                    let index = Int(event.token)
                    guard index < targets.count, samples[index].count < frames else { continue }
                    if samples[index].count + 1 < frames { try card.queueVBlank(crtc: targets[index].crtc, token: event.token) }
                    samples[index].append(VBlankSample(sequence: event.sequence, timestampNs: event.timestampNs, receivedNs: received))
                }
            }
        }
        return samples
    }

    /// CLOCK_REALTIME with the CLOCK_MONOTONIC of the same instant: the realtime read between
    /// the two monotonic reads closest together of five, so a preemption cannot skew the pair.
    static func clockPair() -> ClockPair {
        ClockPair.tightest(monotonic: { now(CLOCK_MONOTONIC) }, realtime: { now(CLOCK_REALTIME) })
    }

    static func now(_ clock: clockid_t) -> UInt64 {
        var ts = timespec()
        clock_gettime(clock, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }
}
