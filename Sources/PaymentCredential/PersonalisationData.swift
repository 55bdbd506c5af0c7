public import OrchardCrypto

/// What a token service personalises a card applet with: the one format both parties use (the token service
/// writes it, the Secure Element reads it), sealed to the Secure Element's key with `SealedEnvelope` under
/// ``envelopePurpose``.
///
/// Plaintext layout (``SecretTLV``), each tag exactly once, no other tag:
///
/// | tag | value |
/// |---|---|
/// | `00` | format version `01` |
/// | `10` | token reference (1–128 printable ASCII) |
/// | `11` | DPAN (12–19 ASCII digits) |
/// | `12` | PAN sequence number (one byte, 0–99) |
/// | `13` | token expiry `YYMM` (ASCII) |
/// | `14` | network (`visa`, `masterCard`, ...: 1–32 letters or digits) |
/// | `20` | proximity card master key MK-AC (16 bytes, two-key TDES) |
/// | `21` | remote-payment card master key (16 bytes) |
///
/// Holds the card's keys and DPAN: never printed (the description shows the token reference and the last four
/// digits), mirror empty. The card master keys exist in clear only in the token service's HSM, inside this
/// encoding, and inside the Secure Element.
public struct PersonalisationData: Sendable, CustomStringConvertible, CustomDebugStringConvertible,
    CustomReflectable
{
    /// The purpose the envelope is sealed and opened under: sender, recipient and use.
    public static let envelopePurpose = "token-service>secure-element:personalisation"
    /// The format version this code writes and reads.
    public static let version: UInt8 = 1

    public let tokenReference: String
    /// The device account number, ASCII digits.
    public let dpan: SecureBytes
    /// EMV tag 5F34.
    public let panSequenceNumber: UInt8
    /// `YYMM`.
    public let expiry: String
    public let network: String
    public let proximityMasterKey: SymmetricKey
    public let remoteMasterKey: SymmetricKey

    /// Checks the form: token reference 1–128 printable ASCII, DPAN 12–19 digits, PSN 0–99, expiry YYMM,
    /// network 1–32 letters or digits, keys 16 bytes.
    /// - Throws: ``PaymentCredentialError/Code/invalidArgument`` naming the field (never its value).
    public init(
        tokenReference: String, dpan: SecureBytes, panSequenceNumber: UInt8, expiry: String, network: String,
        proximityMasterKey: SymmetricKey, remoteMasterKey: SymmetricKey
    ) throws(PaymentCredentialError) {
        try self.init(
            tokenReference: tokenReference, dpan: dpan, panSequenceNumber: panSequenceNumber, expiry: expiry,
            network: network, proximityMasterKey: proximityMasterKey, remoteMasterKey: remoteMasterKey,
            code: .invalidArgument)
    }

    /// The same with the DPAN as a string (tests and simulations; a token service passes ``SecureBytes``).
    public init(
        tokenReference: String, dpan: String, panSequenceNumber: UInt8, expiry: String, network: String,
        proximityMasterKey: SymmetricKey, remoteMasterKey: SymmetricKey
    ) throws(PaymentCredentialError) {
        try self.init(
            tokenReference: tokenReference, dpan: SecureBytes(Array(dpan.utf8)), panSequenceNumber: panSequenceNumber,
            expiry: expiry, network: network, proximityMasterKey: proximityMasterKey, remoteMasterKey: remoteMasterKey)
    }

    private init(
        tokenReference: String, dpan: SecureBytes, panSequenceNumber: UInt8, expiry: String, network: String,
        proximityMasterKey: SymmetricKey, remoteMasterKey: SymmetricKey, code: PaymentCredentialError.Code
    ) throws(PaymentCredentialError) {
        let reference = Array(tokenReference.utf8)
        guard (1...128).contains(reference.count), reference.allSatisfy({ (0x21...0x7E).contains($0) }) else {
            throw PaymentCredentialError(code, "a token reference is 1 to 128 printable ASCII characters")
        }
        let digitsOK = dpan.withUnsafeBytes { $0.allSatisfy(Self.isDigit) }
        guard (12...19).contains(dpan.count), digitsOK else {
            throw PaymentCredentialError(code, "a DPAN is 12 to 19 digits")
        }
        guard panSequenceNumber <= 99 else { throw PaymentCredentialError(code, "a PAN sequence number is 0 to 99") }
        let e = Array(expiry.utf8)
        guard e.count == 4, e.allSatisfy(Self.isDigit), let month = Int(expiry.suffix(2)), (1...12).contains(month)
        else { throw PaymentCredentialError(code, "an expiry is YYMM") }
        let n = Array(network.utf8)
        guard (1...32).contains(n.count),
            n.allSatisfy({ Self.isDigit($0) || (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0) })
        else { throw PaymentCredentialError(code, "a network name is 1 to 32 letters or digits") }
        guard proximityMasterKey.byteCount == 16, remoteMasterKey.byteCount == 16 else {
            throw PaymentCredentialError(code, "card master keys are 16 bytes")
        }
        self.tokenReference = tokenReference
        self.dpan = dpan
        self.panSequenceNumber = panSequenceNumber
        self.expiry = expiry
        self.network = network
        self.proximityMasterKey = proximityMasterKey
        self.remoteMasterKey = remoteMasterKey
    }

    /// The item tags of the plaintext.
    public enum Tag {
        public static let version: UInt8 = 0x00
        public static let tokenReference: UInt8 = 0x10
        public static let dpan: UInt8 = 0x11
        public static let panSequenceNumber: UInt8 = 0x12
        public static let expiry: UInt8 = 0x13
        public static let network: UInt8 = 0x14
        public static let proximityMasterKey: UInt8 = 0x20
        public static let remoteMasterKey: UInt8 = 0x21
        static let all: Set<UInt8> = [
            version, tokenReference, dpan, panSequenceNumber, expiry, network, proximityMasterKey, remoteMasterKey,
        ]
    }

    /// The plaintext a token service seals.
    public func encoded() throws(PaymentCredentialError) -> SecureBytes {
        try SecretTLV.encode([
            (Tag.version, SecureBytes([Self.version])),
            (Tag.tokenReference, SecretTLV.text(tokenReference)),
            (Tag.dpan, dpan),
            (Tag.panSequenceNumber, SecureBytes([panSequenceNumber])),
            (Tag.expiry, SecretTLV.text(expiry)),
            (Tag.network, SecretTLV.text(network)),
            (Tag.proximityMasterKey, proximityMasterKey.bytes),
            (Tag.remoteMasterKey, remoteMasterKey.bytes),
        ])
    }

    /// Parses an opened envelope.
    /// - Throws: ``PaymentCredentialError/Code/malformed`` for anything out of layout or form,
    ///   ``PaymentCredentialError/Code/unsupportedVersion`` for another format version.
    public init(decoding plaintext: SecureBytes) throws(PaymentCredentialError) {
        let items = try SecretTLV.decode(plaintext, allowedTags: Tag.all)
        guard try items.bytes(Tag.version, "version").unsafeCopyOfBytes() == [Self.version] else {
            throw PaymentCredentialError(.unsupportedVersion, "unknown personalisation format version")
        }
        try self.init(
            tokenReference: try items.text(Tag.tokenReference, "token reference"),
            dpan: try items.bytes(Tag.dpan, "DPAN"),
            panSequenceNumber: try items.bytes(Tag.panSequenceNumber, "PSN", count: 1).unsafeCopyOfBytes()[0],
            expiry: try items.text(Tag.expiry, "expiry"), network: try items.text(Tag.network, "network"),
            proximityMasterKey: SymmetricKey(try items.bytes(Tag.proximityMasterKey, "proximity key", count: 16)),
            remoteMasterKey: SymmetricKey(try items.bytes(Tag.remoteMasterKey, "remote key", count: 16)),
            code: .malformed)
    }

    /// The last four digits of the DPAN.
    public var dpanSuffix: String { dpan.withUnsafeBytes { String(decoding: $0.suffix(4), as: UTF8.self) } }

    public var description: String { "PersonalisationData(\(tokenReference), ••••\(dpanSuffix), keys redacted)" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }

    static func isDigit(_ byte: UInt8) -> Bool { (0x30...0x39).contains(byte) }
}
