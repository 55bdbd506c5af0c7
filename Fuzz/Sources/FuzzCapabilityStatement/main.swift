import WebMerchantAPI

/// Any byte string must give a capability statement or a typed error; whatever parses is canonical.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzCapabilityStatement(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = UnsafeBufferPointer(start: data, count: size)
    if let statement = try? CapabilityStatement(json: bytes) {
        precondition(statement.json == Array(bytes), "a parsed capability statement is not in canonical form")
    }
    return 0
}
