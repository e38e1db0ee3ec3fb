import CDRM
import Glibc
import Synchronization
import VsyncCore

/// How vblank events are asked for.
public enum VBlankMethod: String, Sendable, Hashable, CaseIterable {
    /// `drmCrtcQueueSequence`: 64-bit counts, ns timestamps, CRTC by object id (Linux 4.15+).
    case crtcSequence = "crtc-sequence"
    /// `drmWaitVBlank` with `DRM_VBLANK_EVENT`: 32-bit counts (widened here), µs timestamps, CRTC by pipe.
    case waitVBlank = "wait-vblank"
}

/// A DRM primary node (`/dev/dri/cardN`), opened read-write.
///
/// Owns its file descriptor: opened in `init`, closed in `deinit`, never handed out for
/// closing (`fileDescriptor` is for poll/epoll only). Sendable because every stored property
/// is immutable except the per-CRTC vblank counts (atomics) and `scanouts` (a `Mutex`, mode
/// setting only); libdrm calls on one fd are plain ioctls and safe from any thread.
public final class Card: Sendable {
    public let path: String
    /// For poll/epoll (readable when vblank events wait). Do not close it.
    public let fileDescriptor: Int32
    /// The kernel driver's name, e.g. `vkms`, `i915`, `amdgpu`.
    public let driverName: String
    /// `DRM_CAP_TIMESTAMP_MONOTONIC`: event timestamps are CLOCK_MONOTONIC (else CLOCK_REALTIME).
    public let hasMonotonicTimestamps: Bool
    /// Whether `drmCrtcGetSequence` works here, probed once at open.
    public let supportsCrtcSequence: Bool
    /// The method `queueVBlank` and `currentVBlank` use.
    public let vblankMethod: VBlankMethod
    /// CRTC object ids in resource order: index = pipe. Fixed for the device's lifetime.
    public let crtcIDs: [UInt32]

    /// Per-CRTC vblank requests in flight and legacy counter widening, by pipe (VBlank.swift).
    let crtcVBlanks: [CRTCVBlanks]
    /// Framebuffers this Card set on CRTCs (mode setting only), freed when replaced.
    let scanouts = Mutex<[UInt32: Scanout]>([:])

    /// `/dev/dri/card*`, in numeric order (`card2` before `card10`). Render nodes are left out:
    /// the kernel refuses vblank waits on them.
    public static func primaryNodePaths(directory: String = "/dev/dri") -> [String] {
        guard let dir = opendir(directory) else { return [] }
        defer { closedir(dir) }
        var numbered: [(Int, String)] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            guard name.hasPrefix("card"), let n = Int(name.dropFirst(4)) else { continue }
            numbered.append((n, "\(directory)/\(name)"))
        }
        return numbered.sorted { $0.0 < $1.0 }.map(\.1)
    }

    /// Opens `path` read-write, non-blocking and close-on-exec. If the kernel made us DRM
    /// master (first opener), gives it back at once so we never stand in a compositor's way;
    /// `acquireMaster()` takes it explicitly for mode setting.
    /// - Parameter method: force a vblank method (tests cover both); nil picks the best one.
    public init(path: String, method: VBlankMethod? = nil) throws(DRMError) {
        let fd = open(path, O_RDWR | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { throw DRMError.from(errno: errno, device: path, operation: "open") }
        guard let version = drmGetVersion(fd) else {
            let code = errno
            close(fd)
            throw DRMError.from(errno: code == 0 ? ENOTTY : code, device: path, operation: "drmGetVersion")
        }
        let name = version.pointee.name.map { String(cString: $0) } ?? "unknown"
        drmFreeVersion(version)

        if drmIsMaster(fd) != 0 { _ = drmDropMaster(fd) }

        var cap: UInt64 = 0
        let monotonic = drmGetCap(fd, UInt64(DRM_CAP_TIMESTAMP_MONOTONIC), &cap) == 0 && cap != 0

        var ids: [UInt32] = []
        var activeID: UInt32? = nil
        if let res = drmModeGetResources(fd) {
            for i in 0..<Int(res.pointee.count_crtcs) {
                let id = res.pointee.crtcs[i]
                ids.append(id)
                if activeID == nil, let crtc = drmModeGetCrtc(fd, id) {
                    if crtc.pointee.mode_valid != 0 { activeID = id }
                    drmModeFreeCrtc(crtc)
                }
            }
            drmModeFreeResources(res)
        }

        self.path = path
        self.fileDescriptor = fd
        self.driverName = name
        self.hasMonotonicTimestamps = monotonic
        self.crtcIDs = ids
        self.crtcVBlanks = ids.map { _ in CRTCVBlanks() }
        self.supportsCrtcSequence = Self.probeCrtcSequence(fd: fd, activeCRTC: activeID)
        self.vblankMethod = method ?? (supportsCrtcSequence ? .crtcSequence : .waitVBlank)
    }

    deinit {
        close(fileDescriptor)
    }

    /// On an active CRTC the call must succeed. With none lit, CRTC id 0 tells the ioctl
    /// apart: ENOENT (no such CRTC) means the ioctl exists and vblank is there.
    private static func probeCrtcSequence(fd: Int32, activeCRTC: UInt32?) -> Bool {
        var seq: UInt64 = 0
        var ns: UInt64 = 0
        if drmCrtcGetSequence(fd, activeCRTC ?? 0, &seq, &ns) == 0 { return true }
        return activeCRTC == nil && errno == ENOENT
    }

    /// Becomes DRM master (needed to set modes). Fails with EACCES/EPERM if a compositor holds it.
    public func acquireMaster() throws(DRMError) {
        if drmIsMaster(fileDescriptor) != 0 { return }
        guard drmSetMaster(fileDescriptor) == 0 else { throw error("drmSetMaster") }
    }

    /// The CRTC's pipe index, or `.unknownCRTC` listing the valid ids.
    func pipe(of crtcID: UInt32) throws(DRMError) -> Int {
        guard let pipe = crtcIDs.firstIndex(of: crtcID) else {
            throw DRMError(
                kind: .unknownCRTC(crtcID: crtcID, valid: crtcIDs), errno: ENOENT,
                device: path, operation: "lookup")
        }
        return pipe
    }

    /// A DRMError from the current errno.
    func error(_ operation: String, crtcID: UInt32? = nil, code: Int32 = errno) -> DRMError {
        DRMError.from(errno: code, device: path, operation: operation, crtcID: crtcID)
    }
}
