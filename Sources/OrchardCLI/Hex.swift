import Foundation

extension Array where Element == UInt8 {
    /// Parses hex (upper or lower case, even length, no separators).
    init?(hex: String) {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(hex.utf8.count / 2)
        var high: UInt8?
        for c in hex.utf8 {
            let v: UInt8
            switch c {
            case 0x30...0x39: v = c - 0x30
            case 0x41...0x46: v = c - 0x37
            case 0x61...0x66: v = c - 0x57
            default: return nil
            }
            if let h = high {
                bytes.append(h << 4 | v)
                high = nil
            } else {
                high = v
            }
        }
        if high != nil { return nil }
        self = bytes
    }

    var hex: String { map { String(format: "%02X", $0) }.joined() }
}
