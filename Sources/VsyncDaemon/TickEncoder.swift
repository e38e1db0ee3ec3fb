import VsyncCore

/// The one buffer ticks are encoded into before their send, and which tick it holds: one
/// vblank's ticks to many subscribers are encoded once per divisor group and protocol version,
/// then patched per subscriber (`Server.sendTick`). A value in the server, so the tick path
/// reaches it with no extra load; its methods make no calls, so no access to it spans one.
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

    /// The size of the tick `buffer` holds if it is group `stamp`'s for `version`, else nil.
    @inline(__always)
    func size(ofStamp stamp: UInt64, version: UInt16) -> Int? {
        stamp != 0 && held.stamp == stamp && held.version == version ? held.size : nil
    }

    /// `buffer` now holds group `stamp`'s tick for `version`, `size` bytes.
    @inline(__always)
    mutating func hold(stamp: UInt64, version: UInt16, size: Int) {
        held = (stamp, version, size)
    }

    /// Called once, by the server's deinit (a struct cannot free on its own).
    func deallocate() { buffer.deallocate() }
}
