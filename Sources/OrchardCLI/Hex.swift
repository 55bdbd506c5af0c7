import OrchardCrypto

extension Array where Element == UInt8 {
    /// Parses hex (upper or lower case, even length, no separators).
    init?(hex: String) {
        guard let bytes = Hex.decode(hex) else { return nil }
        self = bytes
    }

    /// Upper-case hex.
    var hex: String { Hex.encode(self) }
}
