import WebMerchantAPI

/// Any byte string must give a merchant session or a typed error: never a crash, a hang or unbounded memory.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzMerchantSession(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = UnsafeBufferPointer(start: data, count: size)
    if let session = try? MerchantSession(json: bytes) {
        // Whatever parses encodes to a session that parses to the same values.
        precondition((try? MerchantSession(json: session.json)) == session, "a parsed session did not round-trip")
    }
    return 0
}
