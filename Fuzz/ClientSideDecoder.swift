// libFuzzer entry point for DisplayLink's decoder: every datagram the daemon sends goes through
// `ServerMessage.decode`. Built by Scripts/fuzz.sh --target client.

@_cdecl("LLVMFuzzerTestOneInput")
public func clientSideDecoderTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    checkServerMessage(UnsafeRawBufferPointer(start: data, count: size))
    return 0
}

/// Called once by libFuzzer before fuzzing: writes the seeds instead when Scripts/fuzz.sh asks.
@_cdecl("LLVMFuzzerInitialize")
public func clientSideDecoderInitialize(
    _ argc: UnsafeMutablePointer<CInt>?, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>?
) -> CInt {
    Seeds.writeIfAsked(Seeds.serverSeeds())
    return 0
}
