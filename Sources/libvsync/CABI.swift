// swift-format-ignore-file: AlwaysUseLowerCamelCase
// (the C API's names, exported as they are in vsync.h)
// libvsync's C API (include/vsync/vsync.h) over the client core. Compiled with Embedded Swift
// together with the core's and the protocol's own source files (the symlinks beside this file),
// so the library needs only libc and the protocol stays defined once. This file: the handles and
// the error lines; CABI-Client.swift, CABI-Link.swift and CABI-Displays.swift: the calls.
import CVsyncABI
internal import CVsyncSys

/// A `struct vsync_client`. The C handle holds one retain, released by `vsync_client_destroy`;
/// every live link holds another, so a link destroyed after its client never meets freed memory.
final class CClient {
    /// The connection; nil once the client is destroyed (its fds are closed then, not when the
    /// last link goes).
    var core: VsyncClient?
    /// The live links by subscription id, unretained: each is owned by its own C handle.
    var links = IDTable<Unmanaged<CLink>>()
    /// The last error's line, NUL-terminated, for `vsync_client_last_error`: malloc'd, owned
    /// here, replaced only by a later error on this client.
    private(set) var lastError: UnsafeMutablePointer<CChar>
    var dispatching = false

    init(core: VsyncClient) {
        self.core = core
        lastError = copyCString("")
    }

    deinit { lastError.deallocate() }

    func remember(_ line: String) {
        let old = lastError
        lastError = copyCString(line)
        old.deallocate()
    }

    /// Records `code`'s failure with `line` and returns the code negated, for `return fail(...)`.
    func fail(_ code: ClientErrorCode, _ line: String) -> Int32 {
        remember(line)
        return -code.rawValue
    }
}

/// A `struct vsync_link`. The C handle holds the one retain; `vsync_link_destroy` releases it.
final class CLink {
    /// Strong: the client object stays (closed) while a link to it lives.
    let client: CClient
    let id: UInt32
    let frameFn: vsync_frame_fn?
    var displayFn: vsync_display_fn?
    var errorFn: vsync_error_fn?
    let user: UnsafeMutableRawPointer?
    /// The work duration last set, which moves a frame's due time to its commit point.
    var workDurationNs: UInt64 = 0
    /// The late-frame rules' state (the previous frame) and the frames judged, per reason.
    var jank = FrameJankTracker()
    var reasonCounts = [UInt64](repeating: 0, count: FrameJankReason.allCases.count)
    /// The last frame judged, by the library's receipt time: a frame is judged once.
    var lastJudgedReceivedNs: UInt64 = 0

    init(client: CClient, id: UInt32, frameFn: vsync_frame_fn?, user: UnsafeMutableRawPointer?) {
        self.client = client
        self.id = id
        self.frameFn = frameFn
        self.user = user
    }

    var handle: OpaquePointer { OpaquePointer(Unmanaged.passUnretained(self).toOpaque()) }
}

/// A NUL-terminated malloc'd copy of `s`.
func copyCString(_ s: String) -> UnsafeMutablePointer<CChar> {
    let utf8 = s.utf8
    let p = UnsafeMutablePointer<CChar>.allocate(capacity: utf8.count + 1)
    var i = 0
    for byte in utf8 {
        p[i] = CChar(bitPattern: byte)
        i += 1
    }
    p[i] = 0
    return p
}

func cString(_ s: String) -> [CChar] {
    var bytes = s.utf8.map { CChar(bitPattern: $0) }
    bytes.append(0)
    return bytes
}

func client(_ p: OpaquePointer?) -> CClient? {
    p.map { Unmanaged<CClient>.fromOpaque(UnsafeRawPointer($0)).takeUnretainedValue() }
}

func link(_ p: OpaquePointer?) -> CLink? {
    p.map { Unmanaged<CLink>.fromOpaque(UnsafeRawPointer($0)).takeUnretainedValue() }
}

/// Runs `body` with a live link and its client's core; else the errno to return: -EINVAL for
/// NULL, -ENOTCONN once the client was destroyed.
func withLink(_ p: OpaquePointer?, _ body: (CLink, VsyncClient) -> Int32) -> Int32 {
    guard let l = link(p) else { return -ClientErrorCode.invalidArgument.rawValue }
    guard let core = l.client.core else { return -ClientErrorCode.notConnected.rawValue }
    return body(l, core)
}

@_cdecl("vsync_strerror")
public func vsync_strerror(_ code: Int32) -> UnsafePointer<CChar>? {
    let value = code < 0 ? -code : code
    if let known = ClientErrorCode(rawValue: value) {
        return UnsafeRawPointer(known.message.utf8Start).assumingMemoryBound(to: CChar.self)
    }
    // Another errno: the C library's own text (glibc's known codes are static strings).
    return vsync_sys_strerror(value)
}

@_cdecl("vsync_version")
public func vsync_version() -> UInt32 { UInt32(VSYNC_VERSION_MAJOR << 16 | VSYNC_VERSION_MINOR << 8 | VSYNC_VERSION_MICRO) }

@_cdecl("vsync_now_ns")
public func vsync_now_ns() -> UInt64 { vsync_sys_now_ns() }
