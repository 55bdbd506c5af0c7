/// Hexadecimal text for bytes: the one implementation every module uses (keys in commands, identifiers in
/// JSON, APDUs in traces).
public enum Hex {
    /// Two digits per byte, upper case unless `lowercase`.
    public static func encode(_ bytes: some Sequence<UInt8>, lowercase: Bool = false) -> String {
        if let text = bytes.withContiguousStorageIfAvailable({ encode(buffer: $0, lowercase: lowercase) }) {
            return text
        }
        return Array(bytes).withUnsafeBufferPointer { encode(buffer: $0, lowercase: lowercase) }
    }

    /// The two ASCII digits of `byte`, high nibble first, upper case unless `lowercase`: for a writer that puts
    /// hex inside a larger buffer (a UUID's dashed form) without an intermediate string.
    @inlinable
    public static func digits(of byte: UInt8, lowercase: Bool = false) -> (high: UInt8, low: UInt8) {
        let letterOffset: UInt8 = lowercase ? 0x61 - 10 : 0x41 - 10
        let high = byte >> 4
        let low = byte & 0x0F
        return (high < 10 ? 0x30 + high : letterOffset + high, low < 10 ? 0x30 + low : letterOffset + low)
    }

    /// Writes the digits straight into the string's storage (no intermediate array).
    private static func encode(buffer: UnsafeBufferPointer<UInt8>, lowercase: Bool) -> String {
        String(unsafeUninitializedCapacity: buffer.count * 2) { out in
            var i = 0
            for byte in buffer {
                (out[i], out[i + 1]) = digits(of: byte, lowercase: lowercase)
                i += 2
            }
            return i
        }
    }

    /// Parses hex of even length, either case, with no separators; nil for anything else.
    public static func decode(_ text: String) -> [UInt8]? {
        let chars = Array(text.utf8)
        guard chars.count % 2 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(chars.count / 2)
        var index = 0
        while index < chars.count {
            guard let high = nibble(chars[index]), let low = nibble(chars[index + 1]) else { return nil }
            out.append(high << 4 | low)
            index += 2
        }
        return out
    }

    private static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case 0x30...0x39: c - 0x30
        case 0x41...0x46: c - 0x41 + 10
        case 0x61...0x66: c - 0x61 + 10
        default: nil
        }
    }
}
