public import OrchardCrypto

/// The card a user enters in the wallet, as the wallet seals it to the token service for Check Card
/// (`SealedEnvelope` purpose `wallet/<device ID>>token-service:card-data`), so the Pay server that relays it
/// cannot read it: the one format both parties use.
///
/// Plaintext layout (``SecretTLV``), each tag exactly once, no other tag:
///
/// | tag | value |
/// |---|---|
/// | `00` | format version `01` |
/// | `30` | card number (12–19 ASCII digits) |
/// | `31` | expiry `YYMM` (ASCII) |
/// | `32` | card verification value (3 or 4 ASCII digits) |
/// | `33` | cardholder name (1–100 bytes of UTF-8) |
///
/// Checks form only; the wallet checks the Luhn digit as the user types, the token service the card itself.
/// Holds the card number and CVV: never printed (the description shows the last four digits), mirror empty.
public struct CardDataPayload: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The envelope label's purpose part.
    public static let purpose = "card-data"
    /// The format version this code writes and reads.
    public static let version: UInt8 = 1

    /// ASCII digits.
    public let cardNumber: SecureBytes
    /// `YYMM`.
    public let expiry: String
    /// ASCII digits.
    public let verificationValue: SecureBytes
    public let cardholderName: String

    /// - Throws: ``PaymentCredentialError/Code/invalidArgument`` naming the field (never its value).
    public init(
        cardNumber: SecureBytes, expiry: String, verificationValue: SecureBytes, cardholderName: String
    ) throws(PaymentCredentialError) {
        try self.init(
            cardNumber: cardNumber, expiry: expiry, verificationValue: verificationValue,
            cardholderName: cardholderName, code: .invalidArgument)
    }

    private init(
        cardNumber: SecureBytes, expiry: String, verificationValue: SecureBytes, cardholderName: String,
        code: PaymentCredentialError.Code
    ) throws(PaymentCredentialError) {
        guard (12...19).contains(cardNumber.count), cardNumber.withUnsafeBytes({ $0.allSatisfy(Self.isDigit) })
        else { throw PaymentCredentialError(code, "a card number is 12 to 19 digits") }
        let e = Array(expiry.utf8)
        guard e.count == 4, e.allSatisfy(Self.isDigit), let month = Int(expiry.suffix(2)), (1...12).contains(month)
        else { throw PaymentCredentialError(code, "an expiry is YYMM") }
        guard (3...4).contains(verificationValue.count),
            verificationValue.withUnsafeBytes({ $0.allSatisfy(Self.isDigit) })
        else { throw PaymentCredentialError(code, "a CVV is 3 or 4 digits") }
        guard (1...100).contains(cardholderName.utf8.count) else {
            throw PaymentCredentialError(code, "a cardholder name is 1 to 100 bytes")
        }
        self.cardNumber = cardNumber
        self.expiry = expiry
        self.verificationValue = verificationValue
        self.cardholderName = cardholderName
    }

    /// The item tags of the plaintext.
    public enum Tag {
        public static let version: UInt8 = 0x00
        public static let cardNumber: UInt8 = 0x30
        public static let expiry: UInt8 = 0x31
        public static let verificationValue: UInt8 = 0x32
        public static let cardholderName: UInt8 = 0x33
        static let all: Set<UInt8> = [version, cardNumber, expiry, verificationValue, cardholderName]
    }

    /// The plaintext the wallet seals.
    public func encoded() throws(PaymentCredentialError) -> SecureBytes {
        try SecretTLV.encode([
            (Tag.version, SecureBytes([Self.version])),
            (Tag.cardNumber, cardNumber),
            (Tag.expiry, SecretTLV.text(expiry)),
            (Tag.verificationValue, verificationValue),
            (Tag.cardholderName, SecretTLV.text(cardholderName)),
        ])
    }

    /// Parses an opened card-data envelope (the token service's side).
    /// - Throws: ``PaymentCredentialError/Code/malformed`` for anything out of layout or form,
    ///   ``PaymentCredentialError/Code/unsupportedVersion`` for another format version.
    public init(decoding plaintext: SecureBytes) throws(PaymentCredentialError) {
        let items = try SecretTLV.decode(plaintext, allowedTags: Tag.all)
        guard try items.bytes(Tag.version, "version").unsafeCopyOfBytes() == [Self.version] else {
            throw PaymentCredentialError(.unsupportedVersion, "unknown card data format version")
        }
        try self.init(
            cardNumber: try items.bytes(Tag.cardNumber, "card number"), expiry: try items.text(Tag.expiry, "expiry"),
            verificationValue: try items.bytes(Tag.verificationValue, "CVV"),
            cardholderName: try items.text(Tag.cardholderName, "cardholder name"), code: .malformed)
    }

    /// The last four digits of the card number.
    public var suffix: String { cardNumber.withUnsafeBytes { String(decoding: $0.suffix(4), as: UTF8.self) } }

    public var description: String { "CardDataPayload(••••\(suffix), CVV redacted)" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }

    static func isDigit(_ byte: UInt8) -> Bool { (0x30...0x39).contains(byte) }
}
