import OrchardCrypto

/// EMV's numeric encodings: `n` (BCD, right-justified, leading zeros) and `cn` (BCD, left-justified,
/// trailing `F` nibbles), as amounts, country and currency codes, dates and card numbers use them.
public enum EMVNumeric {
    /// `value` as `n` format in `byteCount` bytes (`2 × byteCount` digits, leading zeros).
    public static func numeric(_ value: UInt64, byteCount: Int) throws(EMVError) -> [UInt8] {
        guard (1...10).contains(byteCount) else {
            throw EMVError(.invalidArgument, "an n-format field is 1 to 10 bytes, not \(byteCount)")
        }
        var out = [UInt8](repeating: 0, count: byteCount)
        var rest = value
        for index in stride(from: byteCount - 1, through: 0, by: -1) {
            let low = UInt8(rest % 10)
            rest /= 10
            let high = UInt8(rest % 10)
            rest /= 10
            out[index] = high << 4 | low
        }
        guard rest == 0 else {
            throw EMVError(.invalidArgument, "\(value) does not fit in \(byteCount * 2) decimal digits")
        }
        return out
    }

    /// An amount in minor units as EMV's 6-byte `n12` (tags 9F02, 9F03).
    public static func amount(_ minorUnits: UInt64) throws(EMVError) -> [UInt8] {
        try numeric(minorUnits, byteCount: 6)
    }

    /// The value of `n`-format bytes, or nil when a nibble is not a decimal digit.
    public static func value(ofNumeric bytes: some Collection<UInt8>) -> UInt64? {
        guard bytes.count <= 9 else { return nil }
        var value: UInt64 = 0
        for byte in bytes {
            let high = byte >> 4
            let low = byte & 0x0F
            guard high < 10, low < 10 else { return nil }
            value = value * 100 + UInt64(high) * 10 + UInt64(low)
        }
        return value
    }

    /// A string of decimal digits packed two per byte, left-padded with `0` to `byteCount` bytes
    /// (`nil` byte count: as many bytes as the digits need, a leading `0` added to an odd count).
    public static func packDigits(_ digits: String, byteCount: Int? = nil) throws(EMVError) -> [UInt8] {
        let nibbles = try decimalNibbles(digits)
        let count = byteCount ?? (nibbles.count + 1) / 2
        guard nibbles.count <= count * 2 else {
            throw EMVError(.invalidArgument, "\(nibbles.count) digits do not fit in \(count) bytes")
        }
        let padded = [UInt8](repeating: 0, count: count * 2 - nibbles.count) + nibbles
        return stride(from: 0, to: padded.count, by: 2).map { padded[$0] << 4 | padded[$0 + 1] }
    }

    /// Digits packed left-justified with trailing `F` nibbles (`cn` format, e.g. the PAN in tag 5A).
    public static func compressedNumeric(_ digits: String) throws(EMVError) -> [UInt8] {
        var nibbles = try decimalNibbles(digits)
        if nibbles.count % 2 == 1 { nibbles.append(0x0F) }
        return stride(from: 0, to: nibbles.count, by: 2).map { nibbles[$0] << 4 | nibbles[$0 + 1] }
    }

    /// The digits of `cn`-format bytes (stopping at the first `F` nibble), or nil if malformed.
    public static func digits(ofCompressedNumeric bytes: some Collection<UInt8>) -> String? {
        var out = ""
        var ended = false
        for nibble in bytes.flatMap({ [$0 >> 4, $0 & 0x0F] }) {
            if ended {
                guard nibble == 0x0F else { return nil }
            } else if nibble == 0x0F {
                ended = true
            } else {
                guard nibble < 10 else { return nil }
                out.append(Character(Unicode.Scalar(0x30 + nibble)))
            }
        }
        return out
    }

    /// The digits of `n`-format bytes as a string (leading zeros kept), or nil if a nibble is not a digit.
    public static func digits(ofNumeric bytes: some Collection<UInt8>) -> String? {
        var out = ""
        for nibble in bytes.flatMap({ [$0 >> 4, $0 & 0x0F] }) {
            guard nibble < 10 else { return nil }
            out.append(Character(Unicode.Scalar(0x30 + nibble)))
        }
        return out
    }

    static func decimalNibbles(_ digits: String) throws(EMVError) -> [UInt8] {
        var nibbles: [UInt8] = []
        for c in digits.utf8 {
            guard (0x30...0x39).contains(c) else {
                throw EMVError(.invalidArgument, "expected decimal digits only")
            }
            nibbles.append(c - 0x30)
        }
        return nibbles
    }
}

extension Collection<UInt8> {
    /// Upper-case hex, two characters per byte.
    var hexString: String { Hex.encode(self) }
}

/// Parses hex (either case, even length, no separators).
func parseHex(_ text: String) -> [UInt8]? { Hex.decode(text) }
