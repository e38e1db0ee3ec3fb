import CDRM
import Glibc
import VsyncCore

/// Mode setting through the legacy `drmModeSetCrtc`, for the vkms test helper.
///
/// The framebuffer belongs to this fd: the kernel removes it when the Card closes, and the CRTC
/// then falls back to fbcon's mode. Keep the Card open for as long as the mode must hold.
extension Card {
    struct Scanout {
        var framebufferID: UInt32
        var handle: UInt32
    }

    /// Lights `crtcID` driving `connectorID` with exactly these timings, scanning out a black
    /// dumb buffer of the mode's size. Takes DRM master first (fails if a compositor holds it).
    public func setMode(crtcID: UInt32, connectorID: UInt32, timings: ModeTimings) throws(DRMError) {
        _ = try pipe(of: crtcID)
        try acquireMaster()
        let width = UInt32(timings.hdisplay)
        let height = UInt32(timings.vdisplay)
        var handle: UInt32 = 0
        var pitch: UInt32 = 0
        var size: UInt64 = 0
        guard drmModeCreateDumbBuffer(fileDescriptor, width, height, 32, 0, &handle, &pitch, &size) == 0 else {
            throw error("drmModeCreateDumbBuffer")
        }
        var framebufferID: UInt32 = 0
        guard drmModeAddFB(fileDescriptor, width, height, 24, 32, pitch, handle, &framebufferID) == 0 else {
            let code = errno
            _ = drmModeDestroyDumbBuffer(fileDescriptor, handle)
            throw error("drmModeAddFB", code: code)
        }
        var info = Self.modeInfo(from: timings)
        var connector = connectorID
        guard drmModeSetCrtc(fileDescriptor, crtcID, framebufferID, 0, 0, &connector, 1, &info) == 0 else {
            let code = errno
            release(Scanout(framebufferID: framebufferID, handle: handle))
            throw error("drmModeSetCrtc", code: code)
        }
        let previous = scanouts.withLock { $0.updateValue(Scanout(framebufferID: framebufferID, handle: handle), forKey: crtcID) }
        if let previous { release(previous) }
    }

    /// Turns the CRTC off (no mode, no framebuffer): vblank waits on it then fail with EINVAL.
    public func disableCRTC(id crtcID: UInt32) throws(DRMError) {
        _ = try pipe(of: crtcID)
        try acquireMaster()
        guard drmModeSetCrtc(fileDescriptor, crtcID, 0, 0, 0, nil, 0, nil) == 0 else {
            throw error("drmModeSetCrtc")
        }
        if let previous = scanouts.withLock({ $0.removeValue(forKey: crtcID) }) { release(previous) }
    }

    /// Gives DRM master back, keeping the framebuffers (they belong to the fd, not to master):
    /// another process can then set the card's other CRTCs while this one holds its mode.
    public func dropMaster() {
        if drmIsMaster(fileDescriptor) != 0 { _ = drmDropMaster(fileDescriptor) }
    }

    private func release(_ scanout: Scanout) {
        _ = drmModeRmFB(fileDescriptor, scanout.framebufferID)
        _ = drmModeDestroyDumbBuffer(fileDescriptor, scanout.handle)
    }
}
