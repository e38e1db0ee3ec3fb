import CDRM
import Glibc
import Synchronization
import VsyncCore

/// One vblank, as the kernel reported it.
public struct VBlankEvent: Sendable, Hashable {
    /// The token given to `queueVBlank`.
    public var token: UInt32
    /// The CRTC's index on the card (its position in `Card.crtcIDs`).
    public var pipe: Int
    public var crtcID: UInt32
    /// The CRTC's vblank counter, 64 bits (widened on the legacy path).
    public var sequence: UInt64
    /// Kernel timestamp of the vblank, ns (CLOCK_MONOTONIC when `hasMonotonicTimestamps`).
    public var timestampNs: UInt64

    public init(token: UInt32, pipe: Int, crtcID: UInt32, sequence: UInt64, timestampNs: UInt64) {
        self.token = token
        self.pipe = pipe
        self.crtcID = crtcID
        self.sequence = sequence
        self.timestampNs = timestampNs
    }

    /// The 64 bits the kernel hands back in the event: the pipe in the high half (legacy
    /// events carry no CRTC of their own on old kernels), the caller's token in the low half.
    /// The event names its CRTC and its caller's display without any table.
    public static func userData(pipe: Int, token: UInt32) -> UInt64 {
        UInt64(UInt32(truncatingIfNeeded: pipe)) << 32 | UInt64(token)
    }
}

/// The requests in flight for one CRTC and the widening of its legacy 32-bit counter, kept by
/// its card at the CRTC's pipe. Atomics rather than a lock: the event path takes no lock. One
/// reader at a time per card is assumed (the daemon's loop, or one probe thread).
final class CRTCVBlanks: Sendable {
    let inFlight = Atomic<Int>(0)
    /// The vblank the next request is for.
    let nextSequence = Atomic<UInt64>(0)
    /// The newest widened legacy count plus one; 0 before the first.
    private let widenedPlusOne = Atomic<UInt64>(0)

    func widen(_ raw: UInt32) -> UInt64 {
        let stored = widenedPlusOne.load(ordering: .relaxed)
        var widener = SequenceWidener(newest: stored == 0 ? nil : stored - 1)
        let wide = widener.widen(raw)
        if let newest = widener.newest { widenedPlusOne.store(newest &+ 1, ordering: .relaxed) }
        return wide
    }

    /// One request came back.
    func arrived() {
        var n = inFlight.load(ordering: .relaxed)
        while n > 0 {
            let (exchanged, original) = inFlight.compareExchange(expected: n, desired: n - 1, ordering: .relaxed)
            if exchanged { return }
            n = original
        }
    }
}

/// One vblank event as the kernel wrote it (`struct drm_event_vblank` or
/// `struct drm_event_crtc_sequence`, <drm/drm.h>), before widening.
struct RawVBlank: Equatable {
    var userData: UInt64
    var sequence: UInt64
    var timestampNs: UInt64
    var isLegacy: Bool
}

extension Card {
    /// How many vblank requests `fillVBlankQueue` keeps in flight per CRTC: a reader woken that
    /// many frames late still gets every vblank. The kernel gives each open file 4096 bytes of
    /// event space (128 events of 32 bytes), shared by the card's CRTCs, so a card with many
    /// CRTCs keeps fewer per CRTC.
    public var vblankQueueDepth: Int { min(8, max(2, 120 / max(crtcIDs.count, 1))) }

    @discardableResult
    public func fillVBlankQueue(crtcID: UInt32, token: UInt32) throws(DRMError) -> Bool {
        try fillVBlankQueue(pipe: pipe(of: crtcID), token: token)
    }

    /// Keeps `vblankQueueDepth` requests in flight for the CRTC at `pipe`, each for the vblank
    /// after the one before (absolute sequences; a request whose vblank has already gone is
    /// served at the next), so that a reader descheduled for several frames loses none: the
    /// kernel sends each event when its vblank comes. The first request, or the first after the
    /// queue ran dry (the CRTC went off: the kernel flushed every request), aims at the next
    /// vblank. Throws only when no request is in flight: a full event buffer merely stops the
    /// filling. `depthLimit`: fewer in flight than `vblankQueueDepth`, never fewer than one.
    /// Returns true when the queue was empty and this call queued its first request: the
    /// kernel held no vblank reference for this reader in between, so it may have turned the
    /// CRTC's interrupt off and on again.
    @discardableResult
    public func fillVBlankQueue(pipe: Int, token: UInt32, depthLimit: Int? = nil) throws(DRMError) -> Bool {
        guard pipe >= 0, pipe < crtcVBlanks.count else { throw unknownPipe(pipe) }
        let crtc = crtcVBlanks[pipe]
        let depth = max(1, min(vblankQueueDepth, depthLimit ?? vblankQueueDepth))
        let wasEmpty = crtc.inFlight.load(ordering: .relaxed) == 0
        while true {
            let inFlight = crtc.inFlight.load(ordering: .relaxed)
            guard inFlight < depth else { return wasEmpty }
            do throws(DRMError) {
                let queued = try queueVBlank(
                    crtcID: crtcIDs[pipe], pipe: pipe, token: token,
                    absolute: inFlight > 0 ? crtc.nextSequence.load(ordering: .relaxed) : nil)
                crtc.inFlight.add(1, ordering: .relaxed)
                crtc.nextSequence.store(queued &+ 1, ordering: .relaxed)
            } catch {
                if inFlight > 0 { return wasEmpty }
                throw error
            }
        }
    }

    /// Asks for one event at the next vblank of `crtc`; read it with `readEvents()` once the fd
    /// is readable. `token` comes back in the event. Throws `.crtcOff` when the CRTC has no mode.
    public func queueVBlank(crtc: CRTC, token: UInt32) throws(DRMError) {
        try queueVBlank(crtcID: crtc.id, pipe: crtc.pipe, token: token)
    }

    public func queueVBlank(crtcID: UInt32, token: UInt32) throws(DRMError) {
        try queueVBlank(crtcID: crtcID, pipe: pipe(of: crtcID), token: token)
    }

    /// Queues one request: for vblank `absolute` (or the next if it has gone), else for the
    /// next vblank. Returns the sequence the kernel queued it for (on the legacy path, the
    /// 32-bit count zero-extended: it is only compared within the queue). Nothing is recorded
    /// per request: the event's user data names the CRTC and the token.
    @discardableResult
    func queueVBlank(crtcID: UInt32, pipe: Int, token: UInt32, absolute: UInt64? = nil) throws(DRMError) -> UInt64 {
        let userData = VBlankEvent.userData(pipe: pipe, token: token)
        let ok: Bool
        let operation: String
        var queued: UInt64 = 0
        switch vblankMethod {
        case .crtcSequence:
            operation = "drmCrtcQueueSequence"
            let flags = UInt32(
                absolute == nil ? DRM_CRTC_SEQUENCE_RELATIVE | DRM_CRTC_SEQUENCE_NEXT_ON_MISS : DRM_CRTC_SEQUENCE_NEXT_ON_MISS)
            ok = drmCrtcQueueSequence(fileDescriptor, crtcID, flags, absolute ?? 1, &queued, userData) == 0
        case .waitVBlank:
            operation = "drmWaitVBlank"
            var vbl = drmVBlank()
            let kind = absolute == nil ? DRM_VBLANK_RELATIVE.rawValue : DRM_VBLANK_ABSOLUTE.rawValue
            vbl.request.type = drmVBlankSeqType(
                rawValue: kind | DRM_VBLANK_EVENT.rawValue | DRM_VBLANK_NEXTONMISS.rawValue | Self.pipeBits(pipe))
            vbl.request.sequence = absolute.map { UInt32(truncatingIfNeeded: $0) } ?? 1
            // `signal` is an unsigned long: 64 bits on the LP64 targets vsyncd builds for.
            vbl.request.signal = UInt(userData)
            ok = drmWaitVBlank(fileDescriptor, &vbl) == 0
            queued = UInt64(vbl.reply.sequence)
        }
        if !ok { throw error(operation, crtcID: crtcID, code: errno) }
        return queued
    }

    /// The CRTC's current vblank count and the time of its last vblank (no waiting).
    public func currentVBlank(crtc: CRTC) throws(DRMError) -> (sequence: UInt64, timestampNs: UInt64) {
        switch vblankMethod {
        case .crtcSequence:
            var seq: UInt64 = 0
            var ns: UInt64 = 0
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
            let seq = crtc.pipe < crtcVBlanks.count ? crtcVBlanks[crtc.pipe].widen(vbl.reply.sequence) : UInt64(vbl.reply.sequence)
            return (seq, ns)
        }
    }

    /// Reads every event waiting on the fd (call when it polls readable). Returns [] when none
    /// are waiting. Events other than vblanks (e.g. page flips) are dropped.
    public func readEvents() throws(DRMError) -> [VBlankEvent] {
        var events: [VBlankEvent] = []
        try readEvents(into: &events)
        return events
    }

    /// ``readEvents()`` appending to the caller's buffer, so a caller that reuses it (the
    /// daemon, every vblank) allocates nothing. The fd is read here, into the stack, rather
    /// than through libdrm's `drmHandleEvent`, whose callbacks cannot carry context: no global
    /// buffer, no lock.
    public func readEvents(into events: inout [VBlankEvent]) throws(DRMError) {
        var code: Int32 = 0
        // Up to 1024 bytes is always on the stack; the kernel returns whole events only, so a
        // full read means more may wait.
        withUnsafeTemporaryAllocation(byteCount: 1024, alignment: 8) { buffer in
            while true {
                let n = read(fileDescriptor, buffer.baseAddress, buffer.count)
                if n < 0 {
                    if errno == EINTR { continue }
                    code = errno
                    return
                }
                Self.decodeEvents(UnsafeRawBufferPointer(rebasing: buffer[..<n])) { raw in
                    deliver(raw, into: &events)
                }
                if n < buffer.count { return }
            }
        }
        if code != 0 && code != EAGAIN && code != EWOULDBLOCK {
            throw error("read", code: code)
        }
    }

    private func deliver(_ raw: RawVBlank, into events: inout [VBlankEvent]) {
        let pipe = Int(raw.userData >> 32)
        guard pipe < crtcVBlanks.count else { return }  // not a request of ours
        let crtc = crtcVBlanks[pipe]
        crtc.arrived()
        let sequence = raw.isLegacy ? crtc.widen(UInt32(truncatingIfNeeded: raw.sequence)) : raw.sequence
        events.append(
            VBlankEvent(
                token: UInt32(truncatingIfNeeded: raw.userData), pipe: pipe, crtcID: crtcIDs[pipe],
                sequence: sequence, timestampNs: raw.timestampNs))
    }

    /// Walks the events of one read: `struct drm_event` headers, each followed by its body
    /// (<drm/drm.h>). Vblank (`drm_event_vblank`) and CRTC sequence (`drm_event_crtc_sequence`)
    /// events are handed to `body`; other kinds are skipped by their length. A header that does
    /// not fit stops the walk (the kernel never writes one).
    static func decodeEvents(_ bytes: UnsafeRawBufferPointer, _ body: (RawVBlank) -> Void) {
        var offset = 0
        while bytes.count - offset >= 8 {
            let type = bytes.loadUnaligned(fromByteOffset: offset, as: UInt32.self)
            let length = Int(bytes.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self))
            guard length >= 8, length <= bytes.count - offset else { return }
            if length >= 32 {
                let userData = bytes.loadUnaligned(fromByteOffset: offset + 8, as: UInt64.self)
                switch type {
                case UInt32(DRM_EVENT_VBLANK):
                    let sec = bytes.loadUnaligned(fromByteOffset: offset + 16, as: UInt32.self)
                    let usec = bytes.loadUnaligned(fromByteOffset: offset + 20, as: UInt32.self)
                    let sequence = bytes.loadUnaligned(fromByteOffset: offset + 24, as: UInt32.self)
                    body(
                        RawVBlank(
                            userData: userData, sequence: UInt64(sequence),
                            timestampNs: UInt64(sec) * 1_000_000_000 + UInt64(usec) * 1_000, isLegacy: true))
                case UInt32(DRM_EVENT_CRTC_SEQUENCE):
                    let ns = bytes.loadUnaligned(fromByteOffset: offset + 16, as: Int64.self)
                    let sequence = bytes.loadUnaligned(fromByteOffset: offset + 24, as: UInt64.self)
                    body(
                        RawVBlank(
                            userData: userData, sequence: sequence,
                            timestampNs: UInt64(clamping: ns), isLegacy: false))
                default: break
                }
            }
            offset += length
        }
    }

    private func unknownPipe(_ pipe: Int) -> DRMError {
        DRMError(kind: .unknownCRTC(crtcID: 0, valid: crtcIDs), errno: ENOENT, device: path, operation: "pipe \(pipe)")
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
