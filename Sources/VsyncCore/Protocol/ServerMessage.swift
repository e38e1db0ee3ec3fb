/// A message from server to client.
public enum ServerMessage: Equatable, Sendable {
    case welcome(Welcome)
    case refused(Refusal)
    case displayList([DisplayInfo])
    case subscribed(Subscribed)
    case tick(Tick)
    case displayEvent(DisplayEvent)
    case error(ErrorMessage)
    /// Protocol 5; the page's descriptor travels beside the bytes (SCM_RIGHTS).
    case timingPage(TimingPageMessage)

    public var type: MessageType {
        switch self {
        case .welcome: .welcome
        case .refused: .refused
        case .displayList: .displayList
        case .subscribed: .subscribed
        case .tick: .tick
        case .displayEvent: .displayEvent
        case .error: .error
        case .timingPage: .timingPage
        }
    }

    /// Displays that fit in one DISPLAY_LIST datagram of protocol 1 and 2 (96-byte records).
    public static let maxDisplaysPerList = maxDisplaysPerList(version: 2)

    /// Displays that fit in one DISPLAY_LIST datagram at `version`; the daemon sends at most this many.
    public static func maxDisplaysPerList(version: UInt16) -> Int {
        (WireProtocol.maxMessageSize - MessageType.displayList.knownSize) / DisplayInfo.wireSize(version: version)
    }

    /// The message as a connection at `version` gets it: display records of 96 bytes before
    /// protocol 3, 224 in it, 240 from 4. (Ticks have their own per-version encoder, `Tick.encode`.)
    public func encoded(version: UInt16 = WireProtocol.currentVersion) -> [UInt8] {
        var w = WireWriter(type: type, capacity: type.knownSize)
        switch self {
        case .welcome(let m):
            w.u16(m.version)
            w.zeros(2)
            w.u32(m.serverFlags.rawValue)
            w.u32(m.serverPID)
        case .refused(let m):
            w.u16(m.code.rawValue)
            w.zeros(2)
            w.text(m.message)
        case .displayList(let displays):
            let list = displays.prefix(Self.maxDisplaysPerList(version: version))
            w.u32(UInt32(list.count))
            w.u32(UInt32(DisplayInfo.wireSize(version: version)))
            for d in list { d.write(&w, version: version) }
        case .subscribed(let m):
            w.u32(m.subscriptionID)
            w.u32(m.displayID)
            w.u32(m.divisor)
            w.zeros(4)
            w.u64(m.displayIntervalNs)
            w.u64(m.clientIntervalNs)
            m.display.write(&w, version: version)
        case .tick(let t):
            var buffer = [UInt8](repeating: 0, count: Tick.wireSize)
            let n = buffer.withUnsafeMutableBytes { t.encode(into: $0, version: version) }
            return Array(buffer.prefix(n))
        case .displayEvent(let m):
            w.u16(m.kind.rawValue)
            w.zeros(6)
            m.display.write(&w, version: version)
        case .error(let m):
            w.u16(m.code.rawValue)
            w.zeros(2)
            w.u32(m.subscriptionID)
            w.text(m.message)
        case .timingPage(let m):
            w.u32(m.pageSize)
            w.u16(m.layout)
            w.zeros(2)
        }
        return w.finish()
    }

    /// Decodes one datagram. Returns nil for a server message type this version does not know
    /// (a newer daemon's): the client ignores it. Client request types are an error.
    public static func decode(_ bytes: UnsafeRawBufferPointer) throws(WireError) -> ServerMessage? {
        let header = try MessageHeader.parse(bytes)
        guard let type = MessageType(rawValue: header.type) else {
            if header.type >= 0x100 { return nil }
            throw .unknownType(header.type)
        }
        guard !type.isClientRequest else { throw .unknownType(header.type) }
        try MessageHeader.requireMinimumSize(type, bytes)
        let r = WireReader(bytes, type: header.type)
        switch type {
        case .welcome:
            return .welcome(
                Welcome(
                    version: try r.u16(8), serverFlags: ServerFlags(rawValue: try r.u32(12)), serverPID: try r.u32(16)))
        case .refused:
            let raw = try r.u16(8)
            guard let code = RefusalCode(rawValue: raw) else { throw .invalidField("refusal code \(raw)") }
            return .refused(Refusal(code: code, message: try r.text(from: 12)))
        case .displayList:
            let count = Int(try r.u32(8))
            let recordSize = Int(try r.u32(12))
            guard recordSize >= DisplayInfo.wireSize else {
                throw .invalidField("display record size \(recordSize) is below \(DisplayInfo.wireSize)")
            }
            // The count is bounded by the datagram before anything is allocated.
            let available = (bytes.count - 16) / recordSize
            guard count <= available else {
                // Not `16 + count * recordSize`: both are peer-chosen u32s and the product can overflow.
                throw .invalidField("display count \(count) does not fit in a \(bytes.count)-byte message")
            }
            var displays: [DisplayInfo] = []
            displays.reserveCapacity(count)
            for i in 0..<count { displays.append(try DisplayInfo.read(r, at: 16 + i * recordSize, size: recordSize)) }
            return .displayList(displays)
        case .subscribed:
            return .subscribed(
                Subscribed(
                    subscriptionID: try r.u32(8), displayID: try r.u32(12), divisor: try r.u32(16),
                    displayIntervalNs: try r.u64(24), clientIntervalNs: try r.u64(32),
                    display: try DisplayInfo.read(r, at: 40, size: bytes.count - 40)))
        case .tick:
            return .tick(try Tick.read(r))
        case .displayEvent:
            let raw = try r.u16(8)
            guard let kind = DisplayEventKind(rawValue: raw) else { throw .invalidField("display event kind \(raw)") }
            return .displayEvent(DisplayEvent(kind: kind, display: try DisplayInfo.read(r, at: 16, size: bytes.count - 16)))
        case .error:
            let raw = try r.u16(8)
            guard let code = ErrorCode(rawValue: raw) else { throw .invalidField("error code \(raw)") }
            return .error(ErrorMessage(code: code, subscriptionID: try r.u32(12), message: try r.text(from: 16)))
        case .timingPage:
            return .timingPage(TimingPageMessage(pageSize: try r.u32(8), layout: try r.u16(12)))
        case .hello, .listDisplays, .subscribe, .setRate, .pause, .resume, .unsubscribe, .setWorkDuration:
            throw .unknownType(header.type)
        }
    }

    /// The tick path's decode: a TICK, checked as `decode` checks it, or nil for any other type
    /// (decode those with `decode`). A client reads a tick per frame, and this skips the copies
    /// of the ServerMessage enum (a TICK is 152 bytes) that `decode` makes on the way.
    public static func decodeTick(_ bytes: UnsafeRawBufferPointer) throws(WireError) -> Tick? {
        let header = try MessageHeader.parse(bytes)
        guard header.type == MessageType.tick.rawValue else { return nil }
        try MessageHeader.requireMinimumSize(.tick, bytes)
        return try Tick.read(WireReader(bytes, type: header.type))
    }

    public static func decode(_ bytes: [UInt8]) throws(WireError) -> ServerMessage? {
        try withUnsafeBytesTyped(bytes) { (b) throws(WireError) in try decode(b) }
    }
}
