public import OrchardCrypto

/// What a token service personalises a card applet with, sealed to the Secure Element's key with
/// ``SealedEnvelope`` and the purpose ``SecureElement/personalisationPurpose``.
///
/// Plaintext layout (the token service's `SEPersonalisationData`): items of one tag byte, a two-byte
/// big-endian length and the value, each tag once, no other tag:
///
/// | tag | value |
/// |---|---|
/// | `00` | format version `01` |
/// | `10` | token reference (ASCII) |
/// | `11` | DPAN (ASCII digits) |
/// | `12` | PAN sequence number (one byte, 0–99) |
/// | `13` | token expiry `YYMM` (ASCII) |
/// | `14` | network (`visa`, `masterCard`, ...) |
/// | `20` | proximity card master key MK-AC (16 bytes, two-key TDES) |
/// | `21` | remote-payment card master key (16 bytes) |
///
/// Holds the card's keys and DPAN: never printed (the description shows the token reference and the last
/// four digits), mirror empty.
public struct PersonalisationData: Sendable, CustomStringConvertible, CustomDebugStringConvertible,
    CustomReflectable
{
    public let tokenReference: String
    /// The device account number.
    public let dpan: SecureBytes
    public let panSequenceNumber: UInt8
    /// `YYMM`.
    public let expiry: String
    public let network: String
    public let proximityMasterKey: SymmetricKey
    public let remoteMasterKey: SymmetricKey

    /// Checks the form: token reference 1–128 printable ASCII, DPAN 12–19 digits, PSN 0–99, expiry YYMM,
    /// network 1–32 letters or digits, keys 16 bytes.
    public init(
        tokenReference: String, dpan: String, panSequenceNumber: UInt8, expiry: String, network: String,
        proximityMasterKey: SymmetricKey, remoteMasterKey: SymmetricKey
    ) throws(SecureElementError) {
        try self.init(
            tokenReference: tokenReference, dpan: SecureBytes(Array(dpan.utf8)), panSequenceNumber: panSequenceNumber,
            expiry: expiry, network: network, proximityMasterKey: proximityMasterKey, remoteMasterKey: remoteMasterKey,
            code: .invalidArgument)
    }

    private init(
        tokenReference: String, dpan: SecureBytes, panSequenceNumber: UInt8, expiry: String, network: String,
        proximityMasterKey: SymmetricKey, remoteMasterKey: SymmetricKey, code: SecureElementError.Code
    ) throws(SecureElementError) {
        let reference = Array(tokenReference.utf8)
        guard (1...128).contains(reference.count), reference.allSatisfy({ (0x21...0x7E).contains($0) }) else {
            throw SecureElementError(code, "a token reference is 1 to 128 printable ASCII characters")
        }
        let digitsOK = dpan.withUnsafeBytes { $0.allSatisfy { (0x30...0x39).contains($0) } }
        guard (12...19).contains(dpan.count), digitsOK else {
            throw SecureElementError(code, "a DPAN is 12 to 19 digits")
        }
        guard panSequenceNumber <= 99 else { throw SecureElementError(code, "a PAN sequence number is 0 to 99") }
        let e = Array(expiry.utf8)
        guard e.count == 4, e.allSatisfy({ (0x30...0x39).contains($0) }), let month = Int(expiry.suffix(2)),
            (1...12).contains(month)
        else { throw SecureElementError(code, "an expiry is YYMM") }
        let n = Array(network.utf8)
        guard (1...32).contains(n.count),
            n.allSatisfy({ (0x30...0x39).contains($0) || (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0) })
        else { throw SecureElementError(code, "a network name is 1 to 32 letters or digits") }
        guard proximityMasterKey.byteCount == 16, remoteMasterKey.byteCount == 16 else {
            throw SecureElementError(code, "card master keys are 16 bytes")
        }
        self.tokenReference = tokenReference
        self.dpan = dpan
        self.panSequenceNumber = panSequenceNumber
        self.expiry = expiry
        self.network = network
        self.proximityMasterKey = proximityMasterKey
        self.remoteMasterKey = remoteMasterKey
    }

    private enum Tag {
        static let version: UInt8 = 0x00
        static let tokenReference: UInt8 = 0x10
        static let dpan: UInt8 = 0x11
        static let psn: UInt8 = 0x12
        static let expiry: UInt8 = 0x13
        static let network: UInt8 = 0x14
        static let proximityKey: UInt8 = 0x20
        static let remoteKey: UInt8 = 0x21
        static let all: Set<UInt8> = [version, tokenReference, dpan, psn, expiry, network, proximityKey, remoteKey]
    }

    /// The plaintext a token service seals (the Secure Element never sends it; tests and simulations do).
    public func encoded() throws(SecureElementError) -> SecureBytes {
        try SecretFields.encode([
            (Tag.version, SecureBytes([1])),
            (Tag.tokenReference, SecretFields.text(tokenReference)),
            (Tag.dpan, dpan),
            (Tag.psn, SecureBytes([panSequenceNumber])),
            (Tag.expiry, SecretFields.text(expiry)),
            (Tag.network, SecretFields.text(network)),
            (Tag.proximityKey, proximityMasterKey.bytes),
            (Tag.remoteKey, remoteMasterKey.bytes),
        ])
    }

    /// Parses an opened envelope; anything malformed is ``SecureElementError/Code/invalidEnvelope``.
    public init(decoding plaintext: SecureBytes) throws(SecureElementError) {
        let what = "the personalisation data"
        let items = try SecretFields.decode(plaintext, allowed: Tag.all, code: .invalidEnvelope, what: what)
        let fields = FieldReader(items: items, code: .invalidEnvelope, what: what)
        guard try fields.bytes(Tag.version, "version").unsafeCopyOfBytes() == [1] else {
            throw SecureElementError(.invalidEnvelope, "unknown personalisation format version")
        }
        try self.init(
            tokenReference: try fields.text(Tag.tokenReference, "token reference"),
            dpan: try fields.bytes(Tag.dpan, "DPAN"),
            panSequenceNumber: try fields.bytes(Tag.psn, "PSN", count: 1).unsafeCopyOfBytes()[0],
            expiry: try fields.text(Tag.expiry, "expiry"), network: try fields.text(Tag.network, "network"),
            proximityMasterKey: SymmetricKey(try fields.bytes(Tag.proximityKey, "proximity key", count: 16)),
            remoteMasterKey: SymmetricKey(try fields.bytes(Tag.remoteKey, "remote key", count: 16)),
            code: .invalidEnvelope)
    }

    /// The last four digits of the DPAN.
    public var dpanSuffix: String { dpan.withUnsafeBytes { String(decoding: $0.suffix(4), as: UTF8.self) } }

    public var description: String { "PersonalisationData(\(tokenReference), ••••\(dpanSuffix), keys redacted)" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}
