import OrchardCrypto
import PaymentCredential

/// Any byte string must give card data or a typed error (the token service's side of the envelope): never a crash.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzCardData(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = SecureBytes(Array(UnsafeBufferPointer(start: data, count: size)))
    if let payload = try? CardDataPayload(decoding: bytes) {
        // Whatever parses must round-trip.
        let encoded = try? payload.encoded()
        precondition(encoded.flatMap { try? CardDataPayload(decoding: $0) } != nil, "card data did not round-trip")
    }
    return 0
}
