import RelayAPI

/// Any bytes must parse into a proximity advertisement (and its body) or give the typed `FormatError`: never a crash,
/// a hang or unbounded memory; an advertisement or a body that parses encodes back to the same bytes.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzProximityAdvertisement(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    if let advertisement = try? ProximityAdvertisement(parsing: bytes) {
        precondition(advertisement.encoded == bytes, "an advertisement did not round-trip")
        _ = advertisement.additionalData
    }
    if let body = try? ProximityAdvertisement.Body(parsing: bytes) {
        precondition(body.encoded == bytes, "an advertisement's body did not round-trip")
    }
    return 0
}
