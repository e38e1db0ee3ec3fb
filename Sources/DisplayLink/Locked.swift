import Foundation

/// A value guarded by a lock.
///
/// `@unchecked Sendable` is sound here: `value` is only ever touched inside `withLock`, which
/// holds `lock` for the whole access. (Synchronization's `Mutex` would do, but it needs
/// macOS 15 and the package still declares macOS 13.)
final class Locked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) { self.value = value }

    @discardableResult
    func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
