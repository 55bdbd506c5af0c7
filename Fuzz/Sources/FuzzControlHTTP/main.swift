import DeviceProcess

/// Any byte string must give one message or the typed error the control socket answers with: never a crash or a
/// hang. The first byte sets how many bytes each read returns (1 to 256), so messages split anywhere are tried.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzControlHTTP(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let first = bytes.first else { return 0 }
    let message = try? ControlSocketParser.parse(Array(bytes.dropFirst()), chunkSize: Int(first) + 1)
    if let message {
        precondition(message.body.count <= 1 << 20, "a body above the limit was accepted")
    }
    return 0
}
