import RelayAPI

/// Any bytes must parse into a relay frame or give the typed `RelayFrame.FormatError`: never a crash, a hang or
/// unbounded memory; a frame that parses encodes back to the same bytes.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRelayFrame(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let frame = try? RelayFrame(parsing: bytes) else { return 0 }
    precondition(frame.encoded == bytes, "a relay frame did not round-trip")
    _ = frame.additionalData
    _ = frame.signedContent
    return 0
}
