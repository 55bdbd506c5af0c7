import Foundation
import NFCLink

/// Any byte stream must split into frames or stop at a typed error, and every frame's JSON payload must give a
/// value or a typed error: never a crash, a hang or unbounded memory.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzNFCFrame(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    var buffer = Array(UnsafeBufferPointer(start: data, count: size))
    let decoder = JSONDecoder()
    while true {
        let decoded: (frame: NFCFrame, count: Int)?
        do {
            decoded = try NFCFrame.decode(prefixOf: buffer)
        } catch {
            break
        }
        guard let (frame, count) = decoded else { break }
        precondition(count > 0 && count <= buffer.count, "a frame took no bytes or more than there were")
        precondition((try? frame.encoded()) == Array(buffer[0..<count]), "a frame did not round-trip")
        buffer.removeFirst(count)
        let payload = Data(frame.payload)
        _ = try? decoder.decode(NFCPolling.self, from: payload)
        _ = try? decoder.decode(NFCJoin.self, from: payload)
        _ = try? decoder.decode(NFCRefusal.self, from: payload)
    }
    return 0
}
