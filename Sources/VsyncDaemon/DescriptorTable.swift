/// Values keyed by file descriptor in a flat array: fds are small and dense, so the epoll loop's
/// lookup on every wake-up is one indexed load instead of hashing into a dictionary (which, cold
/// after a frame of sleep, cost microseconds before the tick could go out).
struct DescriptorTable<Value> {
    private var slots: [Value?] = []

    subscript(fd: Int32) -> Value? {
        get { fd >= 0 && Int(fd) < slots.count ? slots[Int(fd)] : nil }
        set {
            guard fd >= 0 else { return }
            if Int(fd) >= slots.count {
                guard newValue != nil else { return }
                slots.append(contentsOf: repeatElement(nil, count: Int(fd) + 1 - slots.count))
            }
            slots[Int(fd)] = newValue
        }
    }

    /// The fds whose value passes `test` (a rescan's, not the loop's: it walks the table).
    func descriptors(where test: (Value) -> Bool) -> [Int32] {
        slots.indices.compactMap { i in slots[i].map(test) == true ? Int32(i) : nil }
    }
}
