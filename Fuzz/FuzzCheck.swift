// Shared by both fuzz harnesses: the round-trip properties and how a broken one is reported.
// Compiled into the same module as the VsyncCore sources (see Scripts/fuzz.sh), so the
// harnesses see the codec exactly as the daemon and DisplayLink call it.

#if canImport(Glibc)
import Glibc
#endif

/// Stops the fuzzer with a one-line reason. libFuzzer treats the abort as a crash and saves the input.
func fuzzFailure(_ what: String) -> Never {
    fputs("FUZZ PROPERTY BROKEN: \(what)\n", stderr)
    abort()
}

/// Free text as the documented writer sends it: up to the first NUL, at most
/// `WireProtocol.maxTextSize` bytes, cut between Unicode scalars. Written here independently of
/// `WireWriter` so the property does not check the encoder against itself.
func wireText(_ s: String) -> String {
    var kept = String.UnicodeScalarView()
    var bytes = 0
    for scalar in s.unicodeScalars {
        if scalar.value == 0 { break }
        let width = String(scalar).utf8.count
        if bytes + width > WireProtocol.maxTextSize { break }
        bytes += width
        kept.append(scalar)
    }
    return String(kept)
}

/// A decoded server message with its free text cut the way the writer cuts it: the one lossy
/// step between what a reader accepts (text to the end of the datagram) and what a writer sends.
func wireNormalized(_ m: ServerMessage) -> ServerMessage {
    switch m {
    case .refused(var r):
        r.message = wireText(r.message)
        return .refused(r)
    case .error(var e):
        e.message = wireText(e.message)
        return .error(e)
    default:
        return m
    }
}

/// Properties of any datagram the server-side decoder (`ClientMessage.decode`) accepts:
/// it is framed as the protocol says, its re-encoding decodes to the same message, and
/// re-encoding is stable.
func checkClientMessage(_ data: UnsafeRawBufferPointer) {
    let message: ClientMessage
    do { message = try ClientMessage.decode(data) } catch { return }
    checkFraming(data, type: message.type.rawValue)
    guard message.type.isClientRequest else { fuzzFailure("ClientMessage.decode returned server type \(message.type)") }
    let encoded = message.encoded()
    // A SUBSCRIBE whose selector needs its text (kind 4) is 208 bytes; every other message is its type's size.
    var size = message.type.knownSize
    if case .subscribe(let s) = message, case .match = s.selector { size = Subscribe.matchWireSize }
    guard encoded.count == size else {
        fuzzFailure("encoded \(message.type) is \(encoded.count) bytes, known size \(size)")
    }
    let again: ClientMessage
    do { again = try ClientMessage.decode(encoded) } catch {
        fuzzFailure("re-encoded \(message) does not decode: \(error)")
    }
    guard again == message else { fuzzFailure("round trip changed \(message) into \(again)") }
    guard again.encoded() == encoded else { fuzzFailure("re-encoding \(message) is not stable") }
}

/// The same for the client-side decoder (`ServerMessage.decode`), which also returns nil for
/// server types it does not know.
func checkServerMessage(_ data: UnsafeRawBufferPointer) {
    let decoded: ServerMessage?
    do { decoded = try ServerMessage.decode(data) } catch { return }
    guard let message = decoded else {
        // Only a well-framed datagram of an unknown server type (>= 0x100) may be ignored.
        let type = UInt16(data[0]) | UInt16(data[1]) << 8
        guard type >= 0x100, MessageType(rawValue: type) == nil else {
            fuzzFailure("ServerMessage.decode ignored type 0x\(String(type, radix: 16))")
        }
        checkFraming(data, type: type)
        return
    }
    checkFraming(data, type: message.type.rawValue)
    guard !message.type.isClientRequest else { fuzzFailure("ServerMessage.decode returned client type \(message.type)") }
    let encoded = message.encoded()
    guard encoded.count <= WireProtocol.maxMessageSize else {
        fuzzFailure("encoded \(message.type) is \(encoded.count) bytes, over the maximum")
    }
    let again: ServerMessage?
    do { again = try ServerMessage.decode(encoded) } catch {
        fuzzFailure("re-encoded \(message) does not decode: \(error)")
    }
    let expected = wireNormalized(message)
    guard again == expected else {
        fuzzFailure("round trip changed \(expected) into \(again.map { "\($0)" } ?? "nil")")
    }
    guard again?.encoded() == encoded else { fuzzFailure("re-encoding \(message) is not stable") }
}

/// An accepted datagram is 8...4096 bytes, its size field is its length, and it is at least
/// as long as its type's known size.
private func checkFraming(_ data: UnsafeRawBufferPointer, type: UInt16) {
    guard data.count >= WireProtocol.headerSize, data.count <= WireProtocol.maxMessageSize else {
        fuzzFailure("accepted a \(data.count)-byte datagram")
    }
    let size = Int(data[2]) | Int(data[3]) << 8
    guard size == data.count else { fuzzFailure("accepted size field \(size) for a \(data.count)-byte datagram") }
    if let known = MessageType(rawValue: type), data.count < known.minimumSize {
        fuzzFailure("accepted a \(data.count)-byte \(known), shorter than its minimum size \(known.minimumSize)")
    }
}
