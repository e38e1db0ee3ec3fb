/// A small map from subscription ids, kept in id order. A client has a handful of
/// subscriptions, so a scan of a few contiguous UInt32s finds one with no hashing: the tick
/// path looks a subscription up twice per frame, and a Dictionary's hash of the key cost more
/// than the rest of the lookup (libvsync's callgrind counts, docs/PERFORMANCE.md). Values are
/// changed in place through `subscript(at:)`, so a hot field's update copies nothing else.
/// Public for DisplayLink, whose reader thread finds a frame's link the same way.
public struct IDTable<Value> {
    /// Ascending; `values[i]` belongs to `ids[i]`. Inlinable, so a lookup from another module is
    /// specialized for its value type rather than run through generic code.
    @usableFromInline var ids: [UInt32] = []
    @usableFromInline var values: [Value] = []

    @inlinable
    public init() {}

    @inlinable
    public var count: Int { ids.count }
    @inlinable
    public var isEmpty: Bool { ids.isEmpty }
    /// The ids, ascending.
    @inlinable
    public var keys: [UInt32] { ids }

    /// Where `id` is, for `subscript(at:)`; valid until the next insertion or removal.
    @inlinable
    public func index(of id: UInt32) -> Int? {
        for i in ids.indices where ids[i] == id { return i }
        return nil
    }

    @inlinable
    public subscript(at index: Int) -> Value {
        // Read in place: reading one field of a slot copies nothing else.
        _read { yield values[index] }
        _modify { yield &values[index] }
    }

    /// As Dictionary's: nil reads an absent id; assigning nil removes it.
    @inlinable
    public subscript(id: UInt32) -> Value? {
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

    @inlinable
    @discardableResult
    public mutating func removeValue(forKey id: UInt32) -> Value? {
        guard let i = index(of: id) else { return nil }
        ids.remove(at: i)
        return values.remove(at: i)
    }

    @inlinable
    public mutating func removeAll() {
        ids.removeAll()
        values.removeAll()
    }

    @inlinable
    public func contains(where predicate: (Value) -> Bool) -> Bool {
        // Through the buffer, so each value is lent to `predicate` rather than copied out.
        values.withUnsafeBufferPointer { buffer in
            for i in buffer.indices where predicate(buffer[i]) { return true }
            return false
        }
    }

    /// Removes the entries whose id `drop` accepts.
    @inlinable
    public mutating func removeAll(where drop: (UInt32) -> Bool) {
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
    @inlinable
    public var entries: Zip2Sequence<[UInt32], [Value]> { zip(ids, values) }
}

extension IDTable: Sendable where Value: Sendable {}
