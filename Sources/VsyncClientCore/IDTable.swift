/// A small map from subscription ids, kept in id order. A client has a handful of
/// subscriptions, so a scan of a few contiguous UInt32s finds one with no hashing: the tick
/// path looks a subscription up twice per frame, and a Dictionary's hash of the key cost more
/// than the rest of the lookup (libvsync's callgrind counts, docs/PERFORMANCE.md). Values are
/// changed in place through `subscript(at:)`, so a hot field's update copies nothing else.
struct IDTable<Value> {
    /// Ascending; `values[i]` belongs to `ids[i]`.
    private var ids: [UInt32] = []
    private var values: [Value] = []

    var count: Int { ids.count }
    var isEmpty: Bool { ids.isEmpty }
    /// The ids, ascending.
    var keys: [UInt32] { ids }

    /// Where `id` is, for `subscript(at:)`; valid until the next insertion or removal.
    func index(of id: UInt32) -> Int? {
        for i in ids.indices where ids[i] == id { return i }
        return nil
    }

    subscript(at index: Int) -> Value {
        get { values[index] }
        _modify { yield &values[index] }
    }

    /// As Dictionary's: nil reads an absent id; assigning nil removes it.
    subscript(id: UInt32) -> Value? {
        get { index(of: id).map { values[$0] } }
        set {
            if let i = index(of: id) {
                if let newValue {
                    values[i] = newValue
                } else {
                    ids.remove(at: i)
                    values.remove(at: i)
                }
            } else if let newValue {
                var i = ids.count
                while i > 0 && ids[i - 1] > id { i -= 1 }
                ids.insert(id, at: i)
                values.insert(newValue, at: i)
            }
        }
    }

    @discardableResult
    mutating func removeValue(forKey id: UInt32) -> Value? {
        guard let i = index(of: id) else { return nil }
        ids.remove(at: i)
        return values.remove(at: i)
    }

    mutating func removeAll() {
        ids.removeAll()
        values.removeAll()
    }

    func contains(where predicate: (Value) -> Bool) -> Bool { values.contains(where: predicate) }

    /// Removes the entries whose id `drop` accepts.
    mutating func removeAll(where drop: (UInt32) -> Bool) {
        var i = 0
        while i < ids.count {
            if drop(ids[i]) {
                ids.remove(at: i)
                values.remove(at: i)
            } else {
                i += 1
            }
        }
    }

    /// The entries in id order.
    var entries: Zip2Sequence<[UInt32], [Value]> { zip(ids, values) }
}

extension IDTable: Sendable where Value: Sendable {}
