/// A recording of what the kernel gave: every vblank per CRTC, modes, on/off. Written by
/// `vsync-probe record`, replayed by `vsyncd --source replay:FILE`. The line format
/// (README, "Record and replay"):
///
///     vsync-trace 2
///     # free text: who recorded it, on what; synthetic traces say how they were made
///     display ID DEVICE CRTC CONNECTOR
///     mode TIME ID WIDTHxHEIGHT NUM/DEN
///     vrr-capable TIME ID 0|1
///     vrr-range TIME ID MIN_HZ MAX_HZ
///     vrr-enabled TIME ID 0|1
///     vblank ID SEQUENCE TIMESTAMP
///     off TIME ID
///
/// TIME and TIMESTAMP are CLOCK_MONOTONIC ns; NUM/DEN is the exact refresh in Hz (pixel clock
/// over pixels per frame, reduced); `mode` also means the CRTC is lit. Lines come in the order
/// they happened. A reader skips kinds it does not know (newer lines within a version); a
/// change that old readers would misread takes a new version. Version 2 added the `vrr-` lines
/// (the connector's vrr_capable, the EDID's range, 0 0 for none, and the CRTC's VRR_ENABLED):
/// a version 1 reader skipping them would replay VRR's varying intervals as mode changes.
/// Version 1 traces read as before (no VRR).
public struct VBlankTrace: Sendable, Equatable {
    public static let version = 2
    public static let magic = "vsync-trace"

    public struct Display: Sendable, Equatable {
        public var id: UInt32
        public var device: String
        public var crtcID: UInt32
        public var connector: String
        public init(id: UInt32, device: String, crtcID: UInt32, connector: String) {
            self.id = id
            self.device = device
            self.crtcID = crtcID
            self.connector = connector
        }
    }

    public enum Event: Sendable, Equatable {
        case mode(timeNs: UInt64, display: UInt32, width: UInt16, height: UInt16, refresh: RefreshRate)
        case off(timeNs: UInt64, display: UInt32)
        case vblank(display: UInt32, sequence: UInt64, timestampNs: UInt64)
        /// Version 2: the connector's `vrr_capable`, the EDID's range (nil: none), the CRTC's `VRR_ENABLED`.
        case variableRefreshCapable(timeNs: UInt64, display: UInt32, Bool)
        case refreshRange(timeNs: UInt64, display: UInt32, EDIDRefreshRange?)
        case variableRefreshEnabled(timeNs: UInt64, display: UInt32, Bool)

        /// When it happened: the kernel's timestamp for a vblank.
        public var timeNs: UInt64 {
            switch self {
            case .mode(let t, _, _, _, _), .off(let t, _): t
            case .vblank(_, _, let t): t
            case .variableRefreshCapable(let t, _, _), .refreshRange(let t, _, _), .variableRefreshEnabled(let t, _, _): t
            }
        }
    }

    /// The comment lines, without their "# ".
    public var comments: [String]
    public var displays: [Display]
    public var events: [Event]

    public init(comments: [String] = [], displays: [Display] = [], events: [Event] = []) {
        self.comments = comments
        self.displays = displays
        self.events = events
    }

    // MARK: - Writing

    public static var header: String { "\(magic) \(version)" }

    public static func line(_ display: Display) -> String {
        "display \(display.id) \(display.device) \(display.crtcID) \(display.connector)"
    }

    public static func line(_ event: Event) -> String {
        switch event {
        case .mode(let t, let id, let w, let h, let r): "mode \(t) \(id) \(w)x\(h) \(r.numerator)/\(r.denominator)"
        case .off(let t, let id): "off \(t) \(id)"
        case .vblank(let id, let s, let t): "vblank \(id) \(s) \(t)"
        case .variableRefreshCapable(let t, let id, let on): "vrr-capable \(t) \(id) \(on ? 1 : 0)"
        case .refreshRange(let t, let id, let r): "vrr-range \(t) \(id) \(r?.minimumHz ?? 0) \(r?.maximumHz ?? 0)"
        case .variableRefreshEnabled(let t, let id, let on): "vrr-enabled \(t) \(id) \(on ? 1 : 0)"
        }
    }

    /// The whole trace as text, one line each, ending in a newline.
    public var text: String {
        var lines = [Self.header]
        lines += comments.map { "# \($0)" }
        lines += displays.map(Self.line)
        lines += events.map(Self.line)
        return lines.joined(separator: "\n") + "\n"
    }

    // MARK: - Reading

    public struct ParseError: Error, Equatable, CustomStringConvertible {
        public var line: Int
        public var reason: String
        public var description: String { "line \(line): \(reason)" }
    }

    public init(parsing text: String) throws(ParseError) {
        self.init()
        var number = 0
        var sawHeader = false
        var known = Set<UInt32>()
        // "\r\n" is one Character in Swift: split on any newline.
        for line in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline) {
            number += 1
            if line.allSatisfy({ $0 == " " || $0 == "\t" }) { continue }
            if !sawHeader {
                let words = line.split(separator: " ")
                guard words.count == 2, words[0] == Self.magic else {
                    throw ParseError(line: number, reason: "not a vsync trace: the first line must be '\(Self.header)'")
                }
                guard let v = Int(words[1]), v >= 1, v <= Self.version else {
                    throw ParseError(
                        line: number, reason: "trace version \(words[1]) is newer than this reader's \(Self.version): update vsyncd")
                }
                sawHeader = true
                continue
            }
            if line.hasPrefix("#") {
                comments.append(String(line.dropFirst(line.hasPrefix("# ") ? 2 : 1)))
                continue
            }
            let w = line.split(separator: " ", omittingEmptySubsequences: true)
            func int<T: FixedWidthInteger>(_ i: Int, _ what: String, as: T.Type = T.self) throws(ParseError) -> T {
                guard i < w.count, let v = T(w[i]) else {
                    throw ParseError(line: number, reason: "'\(w[0])' wants \(what) as word \(i + 1)")
                }
                return v
            }
            func display(_ i: Int) throws(ParseError) -> UInt32 {
                let id: UInt32 = try int(i, "a display id")
                guard known.contains(id) else {
                    throw ParseError(line: number, reason: "display \(id) is used before its 'display' line")
                }
                return id
            }
            switch w[0] {
            case "display":
                guard w.count == 5 else { throw ParseError(line: number, reason: "'display' wants ID DEVICE CRTC CONNECTOR") }
                let id: UInt32 = try int(1, "a display id")
                guard known.insert(id).inserted else { throw ParseError(line: number, reason: "display \(id) declared twice") }
                displays.append(Display(id: id, device: String(w[2]), crtcID: try int(3, "a CRTC id"), connector: String(w[4])))
            case "mode":
                guard w.count == 5 else { throw ParseError(line: number, reason: "'mode' wants TIME ID WIDTHxHEIGHT NUM/DEN") }
                let size = w[3].split(separator: "x")
                let rate = w[4].split(separator: "/")
                guard size.count == 2, let width = UInt16(size[0]), let height = UInt16(size[1]),
                    rate.count == 2, let num = UInt64(rate[0]), let den = UInt64(rate[1]), num > 0, den > 0
                else { throw ParseError(line: number, reason: "'mode' wants WIDTHxHEIGHT and a refresh NUM/DEN above 0") }
                events.append(
                    .mode(
                        timeNs: try int(1, "a time in ns"), display: try display(2), width: width, height: height,
                        refresh: RefreshRate(numerator: num, denominator: den)))
            case "off":
                guard w.count == 3 else { throw ParseError(line: number, reason: "'off' wants TIME ID") }
                events.append(.off(timeNs: try int(1, "a time in ns"), display: try display(2)))
            case "vblank":
                guard w.count == 4 else { throw ParseError(line: number, reason: "'vblank' wants ID SEQUENCE TIMESTAMP") }
                events.append(
                    .vblank(display: try display(1), sequence: try int(2, "a sequence"), timestampNs: try int(3, "a timestamp in ns")))
            case "vrr-capable", "vrr-enabled":
                guard w.count == 4, w[3] == "0" || w[3] == "1" else {
                    throw ParseError(line: number, reason: "'\(w[0])' wants TIME ID 0|1")
                }
                let (t, id, on): (UInt64, UInt32, Bool) = (try int(1, "a time in ns"), try display(2), w[3] == "1")
                events.append(
                    w[0] == "vrr-capable"
                        ? .variableRefreshCapable(timeNs: t, display: id, on) : .variableRefreshEnabled(timeNs: t, display: id, on))
            case "vrr-range":
                guard w.count == 5 else { throw ParseError(line: number, reason: "'vrr-range' wants TIME ID MIN_HZ MAX_HZ") }
                let minimum: UInt16 = try int(3, "a minimum rate in Hz")
                let maximum: UInt16 = try int(4, "a maximum rate in Hz")
                guard minimum <= maximum, (minimum == 0) == (maximum == 0) else {
                    throw ParseError(line: number, reason: "'vrr-range' wants 0 < MIN_HZ ≤ MAX_HZ, or 0 0 for none")
                }
                events.append(
                    .refreshRange(
                        timeNs: try int(1, "a time in ns"), display: try display(2),
                        minimum == 0 ? nil : EDIDRefreshRange(minimumHz: minimum, maximumHz: maximum)))
            default:
                continue  // a kind from a newer writer: skipped, as the format promises
            }
        }
        guard sawHeader else { throw ParseError(line: max(number, 1), reason: "empty file: not a vsync trace") }
    }
}
