import VsyncCore

/// The one buffer ticks are encoded into before their send, and which tick it holds: one
/// vblank's ticks to many subscribers are encoded once per divisor group and protocol version,
/// then patched per subscriber (`Server.sendTick`). A value in the server, so the tick path
/// reaches it with no extra load.
struct TickEncoder {
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Tick.wireSize, alignment: 8)
    /// What `buffer` holds: the tick of group `stamp` (0 for a tick of its own, never reused)
    /// encoded for `version`, `size` bytes.
    private var held: (stamp: UInt64, version: UInt16, size: Int) = (0, 0, 0)
    private var lastStamp: UInt64 = 0

    /// A new group of identical ticks (one vblank's, one divisor) starts.
    @inline(__always)
    mutating func nextStamp() -> UInt64 {
        lastStamp &+= 1
        return lastStamp
    }

    /// `tick` with `skipped`, encoded for `version` in `buffer`: its size. A tick of the group
    /// the buffer holds is patched (only whose it is and its skipped count differ).
    @inline(__always)
    mutating func encode(_ tick: Tick, skipped: UInt32, version: UInt16, stamp: UInt64) -> Int {
        if stamp != 0 && held.stamp == stamp && held.version == version {
            Tick.patch(buffer, subscriptionID: tick.subscriptionID, skipped: skipped)
            return held.size
        }
        var t = tick
        t.skipped = skipped
        let n = t.encode(into: buffer, version: version)
        held = (stamp, version, n)
        return n
    }

    /// Called once, by the server's deinit (a struct cannot free on its own).
    func deallocate() { buffer.deallocate() }
}
