/// Hex text of `bytes` (two digits per byte).
func hexString(_ bytes: some Sequence<UInt8>, uppercase: Bool = false) -> String {
    let digits: [UInt8] = Array((uppercase ? "0123456789ABCDEF" : "0123456789abcdef").utf8)
    var out: [UInt8] = []
    for byte in bytes {
        out.append(digits[Int(byte >> 4)])
        out.append(digits[Int(byte & 0x0F)])
    }
    return String(decoding: out, as: UTF8.self)
}

/// The bytes of hex text (either case), or `nil` if it is not an even number of hex digits.
func bytesFromHex(_ text: some StringProtocol) -> [UInt8]? {
    let utf8 = Array(text.utf8)
    guard utf8.count % 2 == 0 else { return nil }
    func value(_ c: UInt8) -> UInt8? {
        switch c {
        case 0x30...0x39: c - 0x30
        case 0x41...0x46: c - 0x41 + 10
        case 0x61...0x66: c - 0x61 + 10
        default: nil
        }
    }
    var out: [UInt8] = []
    out.reserveCapacity(utf8.count / 2)
    var i = 0
    while i < utf8.count {
        guard let high = value(utf8[i]), let low = value(utf8[i + 1]) else { return nil }
        out.append(high << 4 | low)
        i += 2
    }
    return out
}
