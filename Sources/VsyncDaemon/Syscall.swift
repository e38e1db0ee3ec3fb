import Glibc

/// A system call that failed: its name and the errno it gave.
public struct SystemCallError: Error, CustomStringConvertible, Sendable {
    public let call: String
    public let code: Int32
    public var description: String { "\(call) failed: \(errnoText(code))" }
}

/// The one place a system call's failure is judged (as swift-nio's `syscall(blocking:)`):
/// EINTR is retried, EAGAIN or EWOULDBLOCK (a non-blocking descriptor with nothing to read or
/// no room) is nil, and any other errno is thrown for the caller to say what it means.
/// `body` returns as the call does: non-negative, or -1 with errno set.
@inline(__always)
func nonBlocking<T: FixedWidthInteger & SignedInteger>(_ call: @autoclosure () -> String, _ body: () -> T) throws(SystemCallError) -> T? {
    while true {
        let result = body()
        if result >= 0 { return result }
        let code = errno
        if code == EINTR { continue }
        if code == EAGAIN || code == EWOULDBLOCK { return nil }
        throw SystemCallError(call: call(), code: code)
    }
}

/// A call that does not block (or may, by design): EINTR retried, any errno thrown.
@inline(__always)
func systemCall<T: FixedWidthInteger & SignedInteger>(_ call: @autoclosure () -> String, _ body: () -> T) throws(SystemCallError) -> T {
    while true {
        let result = body()
        if result >= 0 { return result }
        let code = errno
        if code == EINTR { continue }
        throw SystemCallError(call: call(), code: code)
    }
}

func errnoText(_ code: Int32 = errno) -> String { String(cString: strerror(code)) }
