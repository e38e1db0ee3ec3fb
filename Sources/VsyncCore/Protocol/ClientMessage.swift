/// A request from client to server.
public enum ClientMessage: Equatable, Sendable {
    case hello(Hello)
    case listDisplays
    case subscribe(Subscribe)
    case setRate(SetRate)
    case pause(subscriptionID: UInt32)
    case resume(subscriptionID: UInt32)
    case unsubscribe(subscriptionID: UInt32)
    case setWorkDuration(SetWorkDuration)

    public var type: MessageType {
        switch self {
        case .hello: .hello
        case .listDisplays: .listDisplays
        case .subscribe: .subscribe
        case .setRate: .setRate
        case .pause: .pause
        case .resume: .resume
        case .unsubscribe: .unsubscribe
        case .setWorkDuration: .setWorkDuration
        }
    }

    public func encoded() -> [UInt8] {
        var w = WireWriter(type: type, capacity: type.knownSize)
        switch self {
        case .hello(let m):
            w.u32(WireProtocol.magic)
            w.u16(m.minVersion)
            w.u16(m.maxVersion)
            w.name(m.clientName, width: WireProtocol.nameSize)
        case .listDisplays:
            break
        case .subscribe(let m):
            w.u32(m.subscriptionID)
            w.u32(m.flags.rawValue)
            w.u8(m.selector.kind)
            w.zeros(3)
            switch m.selector {
            case .primary:
                w.u32(0)
                w.zeros(WireProtocol.nameSize)
            case .crtc(let id), .display(let id):
                w.u32(id)
                w.zeros(WireProtocol.nameSize)
            case .connector(let name):
                w.u32(0)
                w.name(name, width: WireProtocol.nameSize)
            case .match:
                w.u32(0)
                w.zeros(WireProtocol.nameSize)
            }
            m.range.write(&w)
            w.zeros(4)
            w.u64(m.workDurationNs)
            // Protocol 3's selector text, only for the kind that needs it: other SUBSCRIBEs stay
            // 80 bytes, as older daemons know them.
            if case .match(let match) = m.selector { w.name(match.text, width: DisplaySelector.maxTextSize) }
        case .setRate(let m):
            w.u32(m.subscriptionID)
            m.range.write(&w)
        case .pause(let id), .resume(let id), .unsubscribe(let id):
            w.u32(id)
        case .setWorkDuration(let m):
            w.u32(m.subscriptionID)
            w.zeros(4)
            w.u64(m.workDurationNs)
        }
        return w.finish()
    }

    /// Decodes one datagram from a connection at protocol `version`. Longer-than-known messages
    /// are accepted (fields appended by a newer client are ignored); shorter ones, server types
    /// and unknown types are errors, and so is what `version` does not have (selector kind 4
    /// before protocol 3).
    public static func decode(_ bytes: UnsafeRawBufferPointer, version: UInt16 = WireProtocol.currentVersion) throws(WireError)
        -> ClientMessage
    {
        let header = try MessageHeader.parse(bytes)
        guard let type = MessageType(rawValue: header.type), type.isClientRequest else {
            throw .unknownType(header.type)
        }
        try MessageHeader.requireMinimumSize(type, bytes)
        let r = WireReader(bytes, type: header.type)
        switch type {
        case .hello:
            let magic = try r.u32(8)
            guard magic == WireProtocol.magic else {
                throw .invalidField("HELLO magic 0x\(String(magic, radix: 16)) is not 0x\(String(WireProtocol.magic, radix: 16))")
            }
            return .hello(
                Hello(
                    minVersion: try r.u16(12), maxVersion: try r.u16(14),
                    clientName: try r.name(16, width: WireProtocol.nameSize, field: "client name")))
        case .listDisplays:
            return .listDisplays
        case .subscribe:
            let id = try r.u32(8)
            let flags = SubscribeFlags(rawValue: try r.u32(12))
            let kind = try r.u8(16)
            let selectorID = try r.u32(20)
            // What the fields spell is judged by the selector grammar, after every field rule of
            // the wire: a selector outside the grammar is refused on its own (not malformed),
            // while a message that breaks the wire stays malformed.
            let selector: Result<DisplaySelector, SelectorSyntaxError>
            switch kind {
            case 0: selector = .success(.primary)
            case 1: selector = Result { () throws(SelectorSyntaxError) in try DisplaySelector.crtc(selectorID).checked() }
            case 2:
                let name = try r.name(24, width: WireProtocol.nameSize, field: "connector name")
                selector = Result { () throws(SelectorSyntaxError) in try DisplaySelector.connector(name).checked() }
            case 3: selector = Result { () throws(SelectorSyntaxError) in try DisplaySelector.display(selectorID).checked() }
            case 4:
                guard version >= 3 else { throw .invalidField("selector kind 4 needs protocol 3, this connection speaks \(version)") }
                guard r.count >= Subscribe.matchWireSize else {
                    throw .invalidField(
                        "selector kind 4 needs the \(Subscribe.matchWireSize)-byte SUBSCRIBE of protocol 3, got \(r.count) bytes")
                }
                // Any selector's text: kind 4 is how the text travels, not a class of selectors.
                let text = try r.name(80, width: DisplaySelector.maxTextSize, field: "selector text")
                selector = Result { () throws(SelectorSyntaxError) in try DisplaySelector.parse(text) }
            default: throw .invalidField("display selector kind \(kind)")
            }
            let range = try FrameRateRange.read(r, at: 56)
            // Protocol 1's 68 bytes end at the range: no work duration. Anything between is cut short.
            let work = r.count == MessageType.subscribe.minimumSize ? 0 : try workDuration(r, at: 72)
            switch selector {
            case .success(let s):
                return .subscribe(Subscribe(subscriptionID: id, selector: s, range: range, flags: flags, workDurationNs: work))
            case .failure(let e):
                throw .badSelector(subscriptionID: id, message: e.message)
            }
        case .setRate:
            return .setRate(SetRate(subscriptionID: try r.u32(8), range: try FrameRateRange.read(r, at: 12)))
        case .pause:
            return .pause(subscriptionID: try r.u32(8))
        case .resume:
            return .resume(subscriptionID: try r.u32(8))
        case .unsubscribe:
            return .unsubscribe(subscriptionID: try r.u32(8))
        case .setWorkDuration:
            return .setWorkDuration(SetWorkDuration(subscriptionID: try r.u32(8), workDurationNs: try workDuration(r, at: 16)))
        case .welcome, .refused, .displayList, .subscribed, .tick, .displayEvent, .error, .timingPage:
            throw .unknownType(header.type)
        }
    }

    private static func workDuration(_ r: WireReader, at offset: Int) throws(WireError) -> UInt64 {
        let ns = try r.u64(offset)
        guard ns <= WorkDuration.maximumNs else {
            throw .invalidField("work duration \(ns) ns is over the maximum of \(WorkDuration.maximumNs)")
        }
        return ns
    }

    public static func decode(_ bytes: [UInt8], version: UInt16 = WireProtocol.currentVersion) throws(WireError) -> ClientMessage {
        try withUnsafeBytesTyped(bytes) { (b) throws(WireError) in try decode(b, version: version) }
    }
}

/// `Array.withUnsafeBytes` with a typed throw.
func withUnsafeBytesTyped<T>(_ a: [UInt8], _ body: (UnsafeRawBufferPointer) throws(WireError) -> T) throws(WireError) -> T {
    let result: Result<T, WireError> = a.withUnsafeBytes { b in
        do throws(WireError) { return .success(try body(b)) } catch { return .failure(error) }
    }
    return try result.get()
}
