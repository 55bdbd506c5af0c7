import PaymentToken

/// Any byte string must give a token or a typed error: never a crash, a hang or unbounded memory.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTokenJSON(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = UnsafeBufferPointer(start: data, count: size)
    if let token = try? PaymentToken(jsonBytes: bytes) {
        // Whatever parses must round-trip.
        let again = try? PaymentToken(jsonBytes: Array(token.json.serialized.utf8))
        precondition(again == token, "a parsed token did not round-trip")
    }
    _ = try? DecryptedPaymentData(plaintext: bytes)
    return 0
}
