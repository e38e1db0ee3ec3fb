import CVsyncHang
import Glibc

/// A stack taken from a hung thread while it hung, innermost frame first, with symbols.
///
/// Names come from the module's full symbol table (present in every binary SwiftPM builds,
/// debug or release, until it is stripped), else from its exported symbols; Swift names are
/// demangled by the runtime's `swift_demangle` (exported by libswiftCore.so, or found in the
/// program's symbol table when the runtime is linked in statically; without either, the
/// mangled name is kept, which still contains the function's name).
public struct HangStack: Sendable, Equatable, CustomStringConvertible {
    public struct Frame: Sendable, Equatable {
        /// The return address (the program counter for the first frame).
        public var address: UInt
        /// The function, demangled where possible; nil in a stripped module.
        public var symbol: String?
        /// Bytes into the function.
        public var offset: UInt
        /// The module's file.
        public var module: String?
    }

    public var frames: [Frame]
    /// The kernel's id of the thread (as `ps -L` and `/proc/PID/task` show it).
    public var threadID: Int32

    public var description: String {
        frames.enumerated().map { i, f in
            let name = f.symbol.map { "\($0) + \(f.offset)" } ?? "0x" + String(f.address, radix: 16)
            let module = f.module.map { " (\($0.split(separator: "/").last.map(String.init) ?? $0))" } ?? ""
            return "#\(i) \(name)\(module)"
        }.joined(separator: "\n")
    }

    /// Whether any frame's function name contains `text`.
    public func contains(function text: String) -> Bool {
        frames.contains { $0.symbol?.contains(text) ?? false }
    }

    /// Why a stack could not be taken.
    public enum Failure: Error, Sendable, Equatable, CustomStringConvertible {
        /// The thread did not run the handler in time (it blocks the signal, or is stopped).
        case timedOut
        case noSuchThread
        case notInstalled
        case failed(errno: Int32)

        public var description: String {
            switch self {
            case .timedOut: "the thread did not answer the stack signal in time (it blocks the signal, or is stopped)"
            case .noSuchThread: "the thread is gone"
            case .notInstalled: "the stack signal's handler is not installed"
            case .failed(let e): "capture failed: \(String(cString: strerror(e)))"
            }
        }
    }

    /// Signals `thread` and waits for its stack, then symbolizes it on the calling thread; nil
    /// when `stillStuck`, asked as soon as the stack is in, says the thread had moved on (the
    /// stack would be of what it ran next). Naming the frames may outlast a short hang: the
    /// stack is still the hang's.
    static func capture(
        thread: pthread_t, threadID: Int32, signal: Int32, timeoutNs: Int64, stillStuck: () -> Bool
    ) -> Result<HangStack, Failure>? {
        var addresses = [UnsafeMutableRawPointer?](repeating: nil, count: Int(VSYNC_HANG_MAX_FRAMES))
        let n = addresses.withUnsafeMutableBufferPointer {
            vsync_hang_capture(thread, signal, $0.baseAddress, Int32($0.count), timeoutNs)
        }
        switch n {
        case let n where n >= 0:
            guard stillStuck() else { return nil }
            let frames = addresses.prefix(Int(n)).enumerated().map { i, a in
                symbolize(UInt(bitPattern: a), isReturnAddress: i > 0)
            }
            return .success(HangStack(frames: frames, threadID: threadID))
        case -ETIMEDOUT: return .failure(.timedOut)
        case -ESRCH: return .failure(.noSuchThread)
        case -ENOSYS: return .failure(.notInstalled)
        default: return .failure(.failed(errno: -n))
        }
    }

    /// A return address points after its call, which may be the first byte of the next
    /// function: such frames are looked up one byte back.
    static func symbolize(_ address: UInt, isReturnAddress: Bool) -> Frame {
        let lookup = isReturnAddress && address > 0 ? address - 1 : address
        var symbol = [CChar](repeating: 0, count: 1024)
        var module = [CChar](repeating: 0, count: 512)
        var symbolOffset: UInt = 0
        var moduleOffset: UInt = 0
        let found = vsync_hang_symbolize(
            UnsafeRawPointer(bitPattern: lookup), &symbol, symbol.count, &symbolOffset, &module, module.count, &moduleOffset)
        let name = found > 0 ? demangle(String(decoding: symbol.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)) : nil
        let file = found >= 0 ? String(decoding: module.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) : nil
        return Frame(
            address: address, symbol: name, offset: found > 0 ? symbolOffset + (address - lookup) : 0,
            module: file?.isEmpty == false ? file : nil)
    }

    private typealias DemangleFunction =
        @convention(c) (
            UnsafePointer<CChar>?, Int, UnsafeMutablePointer<CChar>?, UnsafeMutablePointer<Int>?, UInt32
        ) -> UnsafeMutablePointer<CChar>?

    /// The runtime's demangler, looked up once: exported by libswiftCore.so, or found in the
    /// program's own symbol table when the runtime is linked in (--static-swift-stdlib).
    private static let demangler: DemangleFunction? = {
        guard
            let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "swift_demangle")
                ?? vsync_hang_main_program_symbol("swift_demangle")
        else { return nil }
        return unsafeBitCast(symbol, to: DemangleFunction.self)
    }()

    static func demangle(_ name: String) -> String {
        guard let demangler, name.hasPrefix("$s") || name.hasPrefix("_$s") else { return name }
        let result = name.withCString { demangler($0, strlen($0), nil, nil, 0) }
        guard let result else { return name }
        defer { free(result) }
        return String(cString: result)
    }
}
