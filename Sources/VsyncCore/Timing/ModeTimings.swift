/// A display mode's timings, as the kernel's `drm_mode_modeinfo` carries them.
///
/// Pure data: VsyncDRM fills it from libdrm's `drmModeModeInfo`, tests build it by hand.
public struct ModeTimings: Sendable, Hashable, Codable {
    /// Pixel clock in kHz.
    public var clockKHz: UInt32
    public var hdisplay: UInt16
    public var hsyncStart: UInt16
    public var hsyncEnd: UInt16
    public var htotal: UInt16
    public var hskew: UInt16
    public var vdisplay: UInt16
    public var vsyncStart: UInt16
    public var vsyncEnd: UInt16
    public var vtotal: UInt16
    public var vscan: UInt16
    /// The kernel's rounded refresh in Hz: shown to users, never used for timing.
    public var vrefresh: UInt32
    /// `DRM_MODE_FLAG_*` bits.
    public var flags: UInt32
    public var name: String

    public static let flagInterlace: UInt32 = 1 << 4  // DRM_MODE_FLAG_INTERLACE
    public static let flagDoubleScan: UInt32 = 1 << 5  // DRM_MODE_FLAG_DBLSCAN

    public init(
        clockKHz: UInt32,
        hdisplay: UInt16, hsyncStart: UInt16, hsyncEnd: UInt16, htotal: UInt16, hskew: UInt16 = 0,
        vdisplay: UInt16, vsyncStart: UInt16, vsyncEnd: UInt16, vtotal: UInt16, vscan: UInt16 = 0,
        vrefresh: UInt32 = 0, flags: UInt32 = 0, name: String = ""
    ) {
        self.clockKHz = clockKHz
        self.hdisplay = hdisplay
        self.hsyncStart = hsyncStart
        self.hsyncEnd = hsyncEnd
        self.htotal = htotal
        self.hskew = hskew
        self.vdisplay = vdisplay
        self.vsyncStart = vsyncStart
        self.vsyncEnd = vsyncEnd
        self.vtotal = vtotal
        self.vscan = vscan
        self.vrefresh = vrefresh
        self.flags = flags
        self.name = name.isEmpty ? "\(hdisplay)x\(vdisplay)" : name
    }

    public var isInterlaced: Bool { flags & Self.flagInterlace != 0 }
    public var isDoubleScan: Bool { flags & Self.flagDoubleScan != 0 }

    /// The exact refresh rate, as the kernel's `drm_mode_vrefresh()` computes it but without
    /// rounding. Nil for a mode with a zero clock or total (the kernel treats those as 0 Hz).
    public var refreshRate: RefreshRate? {
        guard clockKHz > 0, htotal > 0, vtotal > 0 else { return nil }
        var numerator = UInt64(clockKHz) * 1000
        var denominator = UInt64(htotal) * UInt64(vtotal)
        if isInterlaced { numerator *= 2 }
        if isDoubleScan { denominator *= 2 }
        if vscan > 1 { denominator *= UInt64(vscan) }
        return RefreshRate(numerator: numerator, denominator: denominator)
    }

    /// Timings for a mode at `hertz` on the given active size, with blanking like the
    /// CVT reduced-blanking modes vkms offers. The pixel clock is chosen so the exact
    /// rate is as close to `hertz` as a whole kHz clock allows; read `refreshRate` for it.
    public static func custom(width: UInt16 = 1024, height: UInt16 = 768, hertz: Double) -> ModeTimings {
        let hblank: UInt16 = 160
        let vblank: UInt16 = 38
        let htotal = width + hblank
        let vtotal = height + vblank
        let clock = UInt32((hertz * Double(htotal) * Double(vtotal) / 1000).rounded())
        let rounded = UInt32(hertz.rounded())
        return ModeTimings(
            clockKHz: clock,
            hdisplay: width, hsyncStart: width + 48, hsyncEnd: width + 80, htotal: htotal,
            vdisplay: height, vsyncStart: height + 3, vsyncEnd: height + 7, vtotal: vtotal,
            vrefresh: rounded, flags: 0,
            name: "\(width)x\(height)@\(DecimalText.fixed(hertz, places: 3))"
        )
    }
}
