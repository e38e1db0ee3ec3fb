import CDRM
import Glibc
import Synchronization
import VsyncCore

/// One vblank, as the kernel reported it.
public struct VBlankEvent: Sendable, Hashable {
    /// The token given to `queueVBlank`.
    public var token: UInt64
    public var crtcID: UInt32
    /// The CRTC's vblank counter, 64 bits (widened on the legacy path).
    public var sequence: UInt64
    /// Kernel timestamp of the vblank, ns (CLOCK_MONOTONIC when `hasMonotonicTimestamps`).
    public var timestampNs: UInt64

    public init(token: UInt64, crtcID: UInt32, sequence: UInt64, timestampNs: UInt64) {
        self.token = token; self.crtcID = crtcID; self.sequence = sequence; self.timestampNs = timestampNs
    }
}

/// The requests in flight for one CRTC: how many, and the vblank the next one is for.
struct VBlankQueue {
    var inFlight = 0
    var nextSequence: UInt64 = 0
}

extension Card {
    /// How many vblank requests `fillVBlankQueue` keeps in flight per CRTC: a reader woken that
    /// many frames late still gets every vblank. The kernel gives each open file 4096 bytes of
    /// event space (128 events of 32 bytes), shared by the card's CRTCs, so a card with many
    /// CRTCs keeps fewer per CRTC.
    public var vblankQueueDepth: Int { min(8, max(2, 120 / max(crtcIDs.count, 1))) }

    /// Keeps `vblankQueueDepth` requests in flight for the CRTC, each for the vblank after the
    /// one before (absolute sequences; a request whose vblank has already gone is served at
    /// the next), so that a reader descheduled for several frames loses none: the kernel sends
    /// each event when its vblank comes. The first request, or the first after the queue ran
    /// dry (the CRTC went off: the kernel flushed every request), aims at the next vblank.
    /// Throws only when no request is in flight: a full event buffer merely stops the filling.
    public func fillVBlankQueue(crtcID: UInt32, token: UInt64) throws(DRMError) {
        let pipe = try pipe(of: crtcID)
        let depth = vblankQueueDepth
        while true {
            let queue = state.withLock { $0.queues[crtcID] ?? VBlankQueue() }
            guard queue.inFlight < depth else { return }
            do throws(DRMError) {
                let queued = try queueVBlank(
                    crtcID: crtcID, pipe: pipe, token: token,
                    absolute: queue.inFlight > 0 ? queue.nextSequence : nil)
                state.withLock { s in
                    s.queues[crtcID, default: VBlankQueue()].inFlight += 1
                    s.queues[crtcID, default: VBlankQueue()].nextSequence = queued &+ 1
                }
            } catch {
                if queue.inFlight > 0 { return }
                throw error
            }
        }
    }

    /// Asks for one event at the next vblank of `crtc`; read it with `readEvents()` once the fd
    /// is readable. `token` comes back in the event. Throws `.crtcOff` when the CRTC has no mode.
    public func queueVBlank(crtc: CRTC, token: UInt64) throws(DRMError) {
        try queueVBlank(crtcID: crtc.id, pipe: crtc.pipe, token: token)
    }

    public func queueVBlank(crtcID: UInt32, token: UInt64) throws(DRMError) {
        try queueVBlank(crtcID: crtcID, pipe: pipe(of: crtcID), token: token)
    }

    /// Queues one request: for vblank `absolute` (or the next if it has gone), else for the
    /// next vblank. Returns the sequence the kernel queued it for (on the legacy path, the
    /// 32-bit count zero-extended: it is only compared within the queue).
    @discardableResult
    func queueVBlank(crtcID: UInt32, pipe: Int, token: UInt64, absolute: UInt64? = nil) throws(DRMError) -> UInt64 {
        // The kernel hands back a serial of ours, not the caller's token: it also has to name the
        // CRTC, which legacy vblank events do not carry.
        let serial = state.withLock { s in
            s.nextSerial &+= 1
            s.pending[s.nextSerial] = Pending(token: token, crtcID: crtcID)
            return s.nextSerial
        }
        let ok: Bool
        let operation: String
        var queued: UInt64 = 0
        switch vblankMethod {
        case .crtcSequence:
            operation = "drmCrtcQueueSequence"
            let flags = UInt32(absolute == nil ? DRM_CRTC_SEQUENCE_RELATIVE | DRM_CRTC_SEQUENCE_NEXT_ON_MISS : DRM_CRTC_SEQUENCE_NEXT_ON_MISS)
            ok = drmCrtcQueueSequence(fileDescriptor, crtcID, flags, absolute ?? 1, &queued, serial) == 0
        case .waitVBlank:
            operation = "drmWaitVBlank"
            var vbl = drmVBlank()
            let kind = absolute == nil ? DRM_VBLANK_RELATIVE.rawValue : DRM_VBLANK_ABSOLUTE.rawValue
            vbl.request.type = drmVBlankSeqType(
                rawValue: kind | DRM_VBLANK_EVENT.rawValue | DRM_VBLANK_NEXTONMISS.rawValue | Self.pipeBits(pipe))
            vbl.request.sequence = absolute.map { UInt32(truncatingIfNeeded: $0) } ?? 1
            vbl.request.signal = UInt(serial)
            ok = drmWaitVBlank(fileDescriptor, &vbl) == 0
            queued = UInt64(vbl.reply.sequence)
        }
        if !ok {
            let code = errno
            _ = state.withLock { $0.pending.removeValue(forKey: serial) }
            throw error(operation, crtcID: crtcID, code: code)
        }
        return queued
    }

    /// The CRTC's current vblank count and the time of its last vblank (no waiting).
    public func currentVBlank(crtc: CRTC) throws(DRMError) -> (sequence: UInt64, timestampNs: UInt64) {
        switch vblankMethod {
        case .crtcSequence:
            var seq: UInt64 = 0, ns: UInt64 = 0
            guard drmCrtcGetSequence(fileDescriptor, crtc.id, &seq, &ns) == 0 else {
                throw error("drmCrtcGetSequence", crtcID: crtc.id)
            }
            return (seq, ns)
        case .waitVBlank:
            var vbl = drmVBlank()
            vbl.request.type = drmVBlankSeqType(rawValue: DRM_VBLANK_RELATIVE.rawValue | Self.pipeBits(crtc.pipe))
            vbl.request.sequence = 0
            guard drmWaitVBlank(fileDescriptor, &vbl) == 0 else {
                throw error("drmWaitVBlank", crtcID: crtc.id)
            }
            let ns = UInt64(vbl.reply.tval_sec) * 1_000_000_000 + UInt64(vbl.reply.tval_usec) * 1_000
            let seq = state.withLock { $0.widen(vbl.reply.sequence, crtcID: crtc.id) }
            return (seq, ns)
        }
    }

    /// Reads every event waiting on the fd (call when it polls readable). Returns [] when none
    /// are waiting. Events for requests this Card did not queue (e.g. page flips) are dropped.
    public func readEvents() throws(DRMError) -> [VBlankEvent] {
        var events: [VBlankEvent] = []
        try readEvents(into: &events)
        return events
    }

    /// ``readEvents()`` appending to the caller's buffer, so a caller that reuses it (the
    /// daemon, every vblank) allocates nothing.
    public func readEvents(into events: inout [VBlankEvent]) throws(DRMError) {
        var context = drmEventContext()
        context.version = 4
        context.vblank_handler = { fd, sequence, sec, usec, userData in
            let ns = UInt64(sec) * 1_000_000_000 + UInt64(usec) * 1_000
            EventSink.record(RawEvent(fd: fd, serial: UInt64(UInt(bitPattern: userData)),
                                      sequence: UInt64(sequence), timestampNs: ns, isLegacy: true))
        }
        context.sequence_handler = { fd, sequence, ns, userData in
            EventSink.record(RawEvent(fd: fd, serial: userData, sequence: sequence,
                                      timestampNs: ns, isLegacy: false))
        }
        if drmHandleEvent(fileDescriptor, &context) != 0 {
            let code = errno
            if code != EAGAIN && code != EINTR && code != 0 {
                EventSink.discard(fd: fileDescriptor)
                throw error("drmHandleEvent", code: code)
            }
        }
        state.withLock { s in
            EventSink.take(fd: fileDescriptor, into: &s.raws)
            defer { s.raws.removeAll(keepingCapacity: true) }
            for raw in s.raws {
                guard let pending = s.pending.removeValue(forKey: raw.serial) else { continue }
                if let inFlight = s.queues[pending.crtcID]?.inFlight, inFlight > 0 {
                    s.queues[pending.crtcID]?.inFlight = inFlight - 1
                }
                let sequence = raw.isLegacy
                    ? s.widen(UInt32(truncatingIfNeeded: raw.sequence), crtcID: pending.crtcID)
                    : raw.sequence
                events.append(VBlankEvent(token: pending.token, crtcID: pending.crtcID,
                                          sequence: sequence, timestampNs: raw.timestampNs))
            }
        }
    }

    /// The legacy vblank request's CRTC bits: pipe 0 none, pipe 1 `DRM_VBLANK_SECONDARY`,
    /// higher pipes in the high-CRTC field.
    public static func pipeBits(_ pipe: Int) -> UInt32 {
        switch pipe {
        case 0: 0
        case 1: DRM_VBLANK_SECONDARY.rawValue
        default: (UInt32(pipe) << DRM_VBLANK_HIGH_CRTC_SHIFT) & DRM_VBLANK_HIGH_CRTC_MASK.rawValue
        }
    }
}

extension Card.State {
    mutating func widen(_ raw: UInt32, crtcID: UInt32) -> UInt64 {
        var widener = wideners[crtcID] ?? SequenceWidener()
        let wide = widener.widen(raw)
        wideners[crtcID] = widener
        return wide
    }
}

/// An event as libdrm's C callback saw it, before it is matched to its request.
struct RawEvent: Sendable {
    var fd: Int32
    var serial: UInt64
    var sequence: UInt64
    var timestampNs: UInt64
    var isLegacy: Bool
}

/// Where libdrm's C callbacks put events: they cannot capture context, so they record into
/// this process-wide buffer, tagged with the fd, and `readEvents` takes its own fd's out
/// right after `drmHandleEvent` returns. Both this buffer and the caller's keep their capacity
/// between frames: events are copied out, never handed over, so nothing reallocates.
enum EventSink {
    static let buffer = Mutex<[RawEvent]>([])

    static func record(_ event: RawEvent) {
        buffer.withLock { $0.append(event) }
    }

    /// Moves `fd`'s events to the end of `out`.
    static func take(fd: Int32, into out: inout [RawEvent]) {
        buffer.withLock { all in
            guard !all.isEmpty else { return }
            if all.allSatisfy({ $0.fd == fd }) {
                out.append(contentsOf: all)
                all.removeAll(keepingCapacity: true)
                return
            }
            for event in all where event.fd == fd { out.append(event) }
            all.removeAll { $0.fd == fd }
        }
    }

    /// Drops `fd`'s events (its read failed).
    static func discard(fd: Int32) {
        buffer.withLock { all in all.removeAll { $0.fd == fd } }
    }
}
