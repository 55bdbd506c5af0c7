import OrchardCrypto

/// Hex text of `bytes` (two digits per byte), lower case unless `uppercase`.
func hexString(_ bytes: some Sequence<UInt8>, uppercase: Bool = false) -> String {
    Hex.encode(bytes, lowercase: !uppercase)
}

/// The bytes of hex text (either case), or `nil` if it is not an even number of hex digits.
func bytesFromHex(_ text: some StringProtocol) -> [UInt8]? {
    Hex.decode(String(text))
}
