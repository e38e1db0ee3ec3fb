import CDRM
import Glibc
import VsyncCore

extension Card {
    /// Reads connectors, encoders and CRTCs. By default connectors are read without forcing a
    /// probe (`drmModeGetConnectorCurrent`), which could stall or flicker a live display;
    /// `probingConnectors` asks the driver to re-detect them and refresh their mode lists.
    public func resources(probingConnectors: Bool = false) throws(DRMError) -> CardResources {
        guard let res = drmModeGetResources(fileDescriptor) else {
            throw error("drmModeGetResources", code: errno == 0 ? EOPNOTSUPP : errno)
        }
        defer { drmModeFreeResources(res) }

        var encoders: [Encoder] = []
        for i in 0..<Int(res.pointee.count_encoders) {
            guard let enc = drmModeGetEncoder(fileDescriptor, res.pointee.encoders[i]) else { continue }
            encoders.append(
                Encoder(
                    id: enc.pointee.encoder_id, type: enc.pointee.encoder_type,
                    crtcID: enc.pointee.crtc_id == 0 ? nil : enc.pointee.crtc_id,
                    possibleCRTCs: enc.pointee.possible_crtcs))
            drmModeFreeEncoder(enc)
        }

        var connectors: [Connector] = []
        for i in 0..<Int(res.pointee.count_connectors) {
            let connectorID = res.pointee.connectors[i]
            let read = probingConnectors ? drmModeGetConnector : drmModeGetConnectorCurrent
            guard let conn = read(fileDescriptor, connectorID) else { continue }
            let c = conn.pointee
            let status: ConnectorStatus =
                switch c.connection {
                case DRM_MODE_CONNECTED: .connected
                case DRM_MODE_DISCONNECTED: .disconnected
                default: .unknown
                }
            let modes = (0..<Int(c.count_modes)).map { Self.mode(from: c.modes[$0]) }
            let encoderID = c.encoder_id == 0 ? nil : c.encoder_id
            connectors.append(
                Connector(
                    id: c.connector_id, type: c.connector_type, typeIndex: c.connector_type_id,
                    status: status, modes: modes, encoderID: encoderID,
                    crtcID: encoders.first { $0.id == encoderID }?.crtcID))
            drmModeFreeConnector(conn)
        }

        var crtcs: [CRTC] = []
        for i in 0..<Int(res.pointee.count_crtcs) {
            guard let crtc = try? readCRTC(id: res.pointee.crtcs[i], pipe: i) else { continue }
            crtcs.append(crtc)
        }
        return CardResources(connectors: connectors, encoders: encoders, crtcs: crtcs)
    }

    /// Re-reads one CRTC (cheap: one ioctl), to notice mode changes and the display turning off.
    public func crtc(id: UInt32) throws(DRMError) -> CRTC {
        try readCRTC(id: id, pipe: pipe(of: id))
    }

    func readCRTC(id: UInt32, pipe: Int) throws(DRMError) -> CRTC {
        guard let crtc = drmModeGetCrtc(fileDescriptor, id) else { throw error("drmModeGetCrtc") }
        defer { drmModeFreeCrtc(crtc) }
        let mode = crtc.pointee.mode_valid != 0 ? Self.mode(from: crtc.pointee.mode) : nil
        return CRTC(id: id, pipe: pipe, mode: mode, framebufferID: crtc.pointee.buffer_id)
    }

    static func mode(from info: drmModeModeInfo) -> Mode {
        let name = withUnsafeBytes(of: info.name) { raw in
            String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
        }
        let timings = ModeTimings(
            clockKHz: info.clock,
            hdisplay: info.hdisplay, hsyncStart: info.hsync_start, hsyncEnd: info.hsync_end,
            htotal: info.htotal, hskew: info.hskew,
            vdisplay: info.vdisplay, vsyncStart: info.vsync_start, vsyncEnd: info.vsync_end,
            vtotal: info.vtotal, vscan: info.vscan,
            vrefresh: info.vrefresh, flags: info.flags, name: name)
        return Mode(timings: timings, type: info.type)
    }

    static func modeInfo(from timings: ModeTimings, type: UInt32 = 0x20) -> drmModeModeInfo {  // 0x20: DRM_MODE_TYPE_USERDEF
        var info = drmModeModeInfo()
        info.clock = timings.clockKHz
        info.hdisplay = timings.hdisplay
        info.hsync_start = timings.hsyncStart
        info.hsync_end = timings.hsyncEnd
        info.htotal = timings.htotal
        info.hskew = timings.hskew
        info.vdisplay = timings.vdisplay
        info.vsync_start = timings.vsyncStart
        info.vsync_end = timings.vsyncEnd
        info.vtotal = timings.vtotal
        info.vscan = timings.vscan
        info.vrefresh = timings.vrefresh
        info.flags = timings.flags
        info.type = type
        withUnsafeMutableBytes(of: &info.name) { raw in
            for (i, byte) in timings.name.utf8.prefix(raw.count - 1).enumerated() { raw[i] = byte }
        }
        return info
    }
}
