/// The server's displays by slot, so that a vblank's token finds its display with one indexed
/// load rather than a hash lookup. A token is the slot in its low 16 bits and the slot's
/// generation in its high 16: a slot is reused once its display is gone, and an event still in
/// flight for the old one (a failure the source reports late) does not reach the new one.
struct DisplaySlots {
    static let noToken = UInt32.max
    private var slots: [Display?] = []
    private var generations: [UInt16] = []

    subscript(token: UInt32) -> Display? {
        let slot = Int(token & 0xFFFF)
        guard slot < slots.count, let d = slots[slot], d.token == token else { return nil }
        return d
    }

    func contains(_ d: Display) -> Bool { self[d.token] === d }

    /// Frees the slots of displays no longer listed and gives the new ones a slot and token.
    /// Runs when the list changes (rescan, removal), never per vblank.
    mutating func update(_ displays: [Display]) {
        for slot in slots.indices {
            if let d = slots[slot], !displays.contains(where: { $0 === d }) { slots[slot] = nil }
        }
        for d in displays where !contains(d) {
            let slot: Int
            if let free = slots.firstIndex(where: { $0 == nil }) {
                slot = free
                generations[slot] &+= 1
            } else {
                slot = slots.count
                slots.append(nil)
                generations.append(0)
            }
            precondition(slot <= 0xFFFF, "over 65536 displays")
            slots[slot] = d
            d.token = UInt32(generations[slot]) << 16 | UInt32(slot)
        }
    }
}
