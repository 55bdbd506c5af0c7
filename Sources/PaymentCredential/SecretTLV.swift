public import OrchardCrypto

/// The tag-length-value layout of every secret plaintext that crosses between the device and the network
/// (personalisation, card data) or that a party seals at rest: items of one tag byte, a two-byte big-endian
/// length and the value.
///
/// Encoding writes straight into ``SecureBytes`` and decoding hands out ``SecureBytes``, so key material and
/// card numbers never sit in an ordinary array. Decoding is strict: an unknown, repeated or truncated item is
/// refused with ``PaymentCredentialError/Code/malformed``; error messages name tags, never values.
public enum SecretTLV {
    /// The longest value one item can carry (its length field is two bytes).
    public static let maximumValueLength = 0xFFFF

    /// Encodes `items` in the order given.
    /// - Throws: ``PaymentCredentialError/Code/invalidArgument`` when a value is longer than
    ///   ``maximumValueLength``.
    public static func encode(_ items: [(tag: UInt8, value: SecureBytes)]) throws(PaymentCredentialError) -> SecureBytes
    {
        var total = 0
        for item in items {
            guard item.value.count <= maximumValueLength else {
                throw PaymentCredentialError(.invalidArgument, "item \(item.tag) is longer than 65535 bytes")
            }
            total += 3 + item.value.count
        }
        do {
            return try SecureBytes(count: total) { (buffer) throws(CryptoError) in
                var offset = 0
                for item in items {
                    buffer[offset] = item.tag
                    buffer[offset + 1] = UInt8(item.value.count >> 8)
                    buffer[offset + 2] = UInt8(item.value.count & 0xFF)
                    offset += 3
                    item.value.withUnsafeBytes { value in
                        for index in 0..<value.count { buffer[offset + index] = value[index] }
                    }
                    offset += item.value.count
                }
            }
        } catch {
            throw PaymentCredentialError(.cryptoFailure, "cannot allocate secure memory for the encoding")
        }
    }

    /// Decodes `data`, accepting only `allowedTags`, each at most once.
    public static func decode(_ data: SecureBytes, allowedTags: Set<UInt8>) throws(PaymentCredentialError) -> Items {
        try data.withUnsafeBytes { (bytes) throws(PaymentCredentialError) -> Items in
            var items: [UInt8: SecureBytes] = [:]
            var offset = 0
            while offset < bytes.count {
                guard bytes.count - offset >= 3 else {
                    throw PaymentCredentialError(.malformed, "the data ends inside an item header")
                }
                let tag = bytes[offset]
                let length = Int(bytes[offset + 1]) << 8 | Int(bytes[offset + 2])
                offset += 3
                guard bytes.count - offset >= length else {
                    throw PaymentCredentialError(.malformed, "item \(tag) is truncated")
                }
                guard allowedTags.contains(tag) else {
                    throw PaymentCredentialError(.malformed, "unknown item \(tag)")
                }
                guard items[tag] == nil else { throw PaymentCredentialError(.malformed, "item \(tag) is repeated") }
                items[tag] = SecureBytes(UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + length)]))
                offset += length
            }
            return Items(values: items)
        }
    }

    /// The items of one decoded plaintext, read by tag.
    public struct Items: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
        let values: [UInt8: SecureBytes]

        /// Whether the plaintext had an item `tag`.
        public func contains(_ tag: UInt8) -> Bool { values[tag] != nil }

        /// The value of `tag` (named `name` in the error), of exactly `count` bytes when given.
        public func bytes(_ tag: UInt8, _ name: String, count: Int? = nil) throws(PaymentCredentialError) -> SecureBytes
        {
            guard let value = values[tag] else { throw PaymentCredentialError(.malformed, "the \(name) is missing") }
            if let count, value.count != count {
                throw PaymentCredentialError(.malformed, "the \(name) is \(value.count) bytes, not \(count)")
            }
            return value
        }

        /// The value of `tag` as text (for values that are not secret: references, names, dates).
        public func text(_ tag: UInt8, _ name: String) throws(PaymentCredentialError) -> String {
            let value = try bytes(tag, name)
            return value.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
        }

        public var description: String { "SecretTLV.Items(tags: \(values.keys.sorted()), values redacted)" }
        public var debugDescription: String { description }
        public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
    }

    /// The UTF-8 bytes of `text` as an item value.
    public static func text(_ text: String) -> SecureBytes { SecureBytes(Array(text.utf8)) }

    /// `value` as `count` big-endian bytes.
    public static func integer(_ value: UInt64, byteCount count: Int) -> SecureBytes {
        SecureBytes((0..<count).map { UInt8(truncatingIfNeeded: value >> (8 * UInt64(count - 1 - $0))) })
    }
}
