import DeviceProcess

/// What a page's frame sends the browser agent (BrowserAgentMessage): any byte string must decode into its contract
/// type and be taken, or be refused with a message, never a crash or a hang. The first byte picks the route.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzAgentMessage(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let first = bytes.first else { return 0 }
    let routes = BrowserAgentMessage.routes
    let refusal = BrowserAgentMessage.refusal(of: Array(bytes.dropFirst()), route: routes[Int(first) % routes.count])
    if let refusal {
        precondition(!refusal.isEmpty && refusal.count <= 512, "a refusal without a bounded message")
    }
    return 0
}
