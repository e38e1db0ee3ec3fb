// libFuzzer entry point for the daemon's decoder: every datagram a client sends goes through
// `ClientMessage.decode`. Built by Scripts/fuzz.sh --target server.

@_cdecl("LLVMFuzzerTestOneInput")
public func serverSideDecoderTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    checkClientMessage(UnsafeRawBufferPointer(start: data, count: size))
    return 0
}

/// Called once by libFuzzer before fuzzing: writes the seeds instead when Scripts/fuzz.sh asks.
@_cdecl("LLVMFuzzerInitialize")
public func serverSideDecoderInitialize(
    _ argc: UnsafeMutablePointer<CInt>?, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>?
) -> CInt {
    Seeds.writeIfAsked(Seeds.clientSeeds())
    return 0
}
