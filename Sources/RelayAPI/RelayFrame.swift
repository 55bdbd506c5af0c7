/// A relay frame, the unit the Pay server queues: a routing header in clear, the sender's ephemeral public key, the
/// ciphertext and the sender's signature.
///
/// Layout (all lengths big-endian):
/// ```
/// 01                                   version
/// u8 len ‖ sender device ID (UTF-8)    header: routing data, the only part the Pay server reads
/// u8 len ‖ recipient device ID
/// u64 sequence                         per (sender, recipient), strictly increasing
/// 65 bytes ephemeral P-256 key (X9.63)
/// u32 len ‖ ciphertext ‖ 16-byte tag    AES-256-GCM, additional data = header ‖ ephemeral key
/// u16 len ‖ ECDSA P-256 signature (DER) over "orchard-relay-frame-v1" 00 ‖ everything before it
/// ```
/// Device IDs are 1 to 64 bytes. Parsing checks the structure only; the recipient's device checks the signature,
/// the sequence and the tag.
public struct RelayFrame: Sendable, Hashable {
    /// The routing header: who sends, to whom, and the pair's sequence number.
    public struct Header: Sendable, Hashable {
        public let sender: String
        public let recipient: String
        public let sequence: UInt64
        public init(sender: String, recipient: String, sequence: UInt64) {
            self.sender = sender
            self.recipient = recipient
            self.sequence = sequence
        }

        /// The header's bytes (version byte included): the additional data of the encryption. A device ID longer
        /// than 255 bytes is cut there (no such header parses, and sealing refuses IDs over 64 bytes).
        public var encoded: [UInt8] {
            var bytes: [UInt8] = [RelayFrame.version]
            for id in [sender, recipient] {
                let utf8 = Array(id.utf8.prefix(255))
                bytes.append(UInt8(utf8.count))
                bytes += utf8
            }
            bytes += RelayFrame.bigEndian(sequence, 8)
            return bytes
        }
    }

    /// Why a frame does not parse.
    public struct FormatError: Error, Sendable, Hashable, CustomStringConvertible {
        public let message: String
        public var description: String { message }
    }

    public static let version: UInt8 = 1
    /// What the sender's signature covers before the frame's bytes.
    public static let signatureContext: [UInt8] = Array("orchard-relay-frame-v1".utf8) + [0]
    public static let ephemeralKeyByteCount = 65
    public static let tagByteCount = 16

    public let header: Header
    /// X9.63.
    public let ephemeralKey: [UInt8]
    /// Ciphertext ‖ tag.
    public let sealed: [UInt8]
    /// DER.
    public let signature: [UInt8]

    public init(header: Header, ephemeralKey: [UInt8], sealed: [UInt8], signature: [UInt8]) {
        self.header = header
        self.ephemeralKey = ephemeralKey
        self.sealed = sealed
        self.signature = signature
    }

    /// The additional data of the encryption: header ‖ ephemeral key.
    public var additionalData: [UInt8] { header.encoded + ephemeralKey }

    /// What the sender signs: ``signatureContext`` ‖ header ‖ ephemeral key ‖ length ‖ ciphertext and tag.
    public var signedContent: [UInt8] { Self.signatureContext + unsignedBytes }

    private var unsignedBytes: [UInt8] {
        additionalData + Self.bigEndian(UInt64(sealed.count), 4) + sealed
    }

    /// The frame's bytes.
    public var encoded: [UInt8] { unsignedBytes + Self.bigEndian(UInt64(signature.count), 2) + signature }

    /// Whether `id` is a usable device ID in a header (1 to 64 bytes of UTF-8).
    public static func isDeviceID(_ id: String) -> Bool { (1...64).contains(id.utf8.count) }

    /// Parses `bytes`, refusing a wrong version, a truncated or overlong field, or trailing bytes.
    public init(parsing bytes: [UInt8]) throws(FormatError) {
        var reader = Reader(bytes: bytes)
        guard try reader.take(1) == [Self.version] else { throw FormatError(message: "unknown relay frame version") }
        let sender = try reader.deviceID()
        let recipient = try reader.deviceID()
        let sequence = try reader.integer(8)
        header = Header(sender: sender, recipient: recipient, sequence: sequence)
        ephemeralKey = try reader.take(Self.ephemeralKeyByteCount)
        guard ephemeralKey.first == 0x04 else { throw FormatError(message: "the ephemeral key is not X9.63") }
        let sealedCount = Int(try reader.integer(4))
        guard sealedCount >= Self.tagByteCount else { throw FormatError(message: "the ciphertext has no tag") }
        sealed = try reader.take(sealedCount)
        signature = try reader.take(Int(try reader.integer(2)))
        guard !signature.isEmpty, signature.count <= 72 else {
            throw FormatError(message: "the signature is not an ECDSA P-256 signature")
        }
        guard reader.isAtEnd else { throw FormatError(message: "trailing bytes after the relay frame") }
    }

    static func bigEndian(_ value: UInt64, _ count: Int) -> [UInt8] {
        (0..<count).reversed().map { UInt8(truncatingIfNeeded: value >> (8 * UInt64($0))) }
    }

    private struct Reader {
        let bytes: [UInt8]
        var offset = 0
        var isAtEnd: Bool { offset == bytes.count }

        mutating func take(_ count: Int) throws(FormatError) -> [UInt8] {
            guard count >= 0, bytes.count - offset >= count else {
                throw FormatError(message: "the relay frame is truncated")
            }
            defer { offset += count }
            return Array(bytes[offset..<(offset + count)])
        }

        mutating func integer(_ count: Int) throws(FormatError) -> UInt64 {
            try take(count).reduce(0) { $0 << 8 | UInt64($1) }
        }

        mutating func deviceID() throws(FormatError) -> String {
            let length = Int(try take(1)[0])
            guard let id = String(validating: try take(length), as: UTF8.self), RelayFrame.isDeviceID(id) else {
                throw FormatError(message: "a relay frame's device ID is 1 to 64 bytes of UTF-8")
            }
            return id
        }
    }
}
