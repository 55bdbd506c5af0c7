import CardBasics
import Foundation
public import OrchardCrypto

/// How the user proved their presence to the Secure Enclave.
public enum AuthenticationMethod: UInt8, Sendable, Hashable, CaseIterable, Codable, CustomStringConvertible {
    /// A Face ID match (face devices only).
    case faceID = 1
    /// A Touch ID match (touch devices only).
    case touchID = 2
    /// The device passcode (every device).
    case passcode = 3
    /// A double-click of the side button of an unlocked watch on its wrist.
    case doubleClick = 4

    public var description: String {
        switch self {
        case .faceID: return "Face ID"
        case .touchID: return "Touch ID"
        case .passcode: return "passcode"
        case .doubleClick: return "double-click"
        }
    }

    /// The name used on the wire of the control API and in JSON (`face-id`, `touch-id`, `passcode`,
    /// `double-click`).
    public var name: String {
        switch self {
        case .faceID: return "face-id"
        case .touchID: return "touch-id"
        case .passcode: return "passcode"
        case .doubleClick: return "double-click"
        }
    }

    /// The method named `name` (see ``name``).
    public init?(name: String) {
        guard let method = Self.allCases.first(where: { $0.name == name }) else { return nil }
        self = method
    }

    /// Decodes the ``name`` (`face-id`, ...).
    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let method = Self(name: text) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "unknown method"))
        }
        self = method
    }

    /// Encodes the ``name``.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(name)
    }
}

/// What a payment authorization may be used for: each authorization is valid for its type only.
public enum TransactionType: UInt8, Sendable, Hashable, CaseIterable, Codable, CustomStringConvertible {
    /// At a terminal, through the NFC field.
    case contactless = 1
    /// In an app.
    case inApp = 2
    /// On a website.
    case web = 3

    public var description: String {
        switch self {
        case .contactless: return "contactless"
        case .inApp: return "in-app"
        case .web: return "web"
        }
    }

    /// The type named `name` (`contactless`, `in-app`, `web`).
    public init?(name: String) {
        guard let type = Self.allCases.first(where: { $0.description == name }) else { return nil }
        self = type
    }

    /// Decodes the name (`contactless`, `in-app`, `web`).
    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let type = Self(name: text) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "unknown type"))
        }
        self = type
    }

    /// Encodes the name.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}

/// An amount in minor units of an ISO 4217 currency, within CardBasics' one rule for amounts: 1 to
/// 999,999,999,999 (what EMV's 12 digits carry).
public struct PaymentAmount: Sendable, Hashable, Codable, CustomStringConvertible {
    public let minorUnits: Int64
    /// The ISO 4217 numeric currency code (e.g. 840 for USD, 978 for EUR).
    public let currency: UInt16

    public init(minorUnits: Int64, currency: UInt16) throws(SecureElementError) {
        guard let known = Currency(numericCode: Int(currency)) else {
            throw SecureElementError(.invalidArgument, "a currency is an ISO 4217 numeric code")
        }
        // CardBasics' one rule for an amount's bounds.
        guard (try? Money(minorUnits: minorUnits, currency: known)) != nil else {
            throw SecureElementError(.invalidArgument, "an amount is 1 to 999,999,999,999 minor units")
        }
        self.minorUnits = minorUnits
        self.currency = currency
    }

    public var description: String { "\(minorUnits) (currency \(currency))" }
}

/// The identifier of one card on a Secure Element: 16 random bytes, shown as 32 lowercase hex digits.
/// It is not derived from the DPAN and says nothing about the card.
public struct CardIdentifier: Sendable, Hashable, Comparable, Codable, CustomStringConvertible {
    public let bytes: [UInt8]

    public init(bytes: some Collection<UInt8>) throws(SecureElementError) {
        guard bytes.count == 16 else { throw SecureElementError(.invalidArgument, "a card identifier is 16 bytes") }
        self.bytes = Array(bytes)
    }

    /// Parses the 32-hex-digit form.
    public init(hex: String) throws(SecureElementError) {
        guard let bytes = Hex.decode(hex), bytes.count == 16 else {
            throw SecureElementError(.invalidArgument, "a card identifier is 32 hex digits")
        }
        self.bytes = bytes
    }

    /// A fresh identifier from `random`.
    public init(random: any RandomSource) { bytes = random.bytes(16) }

    public var hex: String { Hex.encode(bytes, lowercase: true) }
    public var description: String { hex }

    public static func < (lhs: CardIdentifier, rhs: CardIdentifier) -> Bool {
        lhs.bytes.lexicographicallyPrecedes(rhs.bytes)
    }

    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        do {
            try self.init(hex: text)
        } catch {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: error.message))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(hex)
    }
}

/// A fresh value the Secure Element issues for one Secure Enclave statement. The statement must quote it,
/// and the Secure Element accepts one statement per challenge, within its lifetime: captured statements
/// cannot be replayed, even after a restart (outstanding challenges live in memory only).
public struct AuthorizationChallenge: Sendable, Hashable {
    public static let byteCount = 16
    public let bytes: [UInt8]

    public init(bytes: some Collection<UInt8>) throws(SecureElementError) {
        guard bytes.count == Self.byteCount else {
            throw SecureElementError(.invalidArgument, "a challenge is \(Self.byteCount) bytes")
        }
        self.bytes = Array(bytes)
    }
}

/// A statement of the Secure Enclave to its paired Secure Element, before signing.
///
/// Wire form (``encoded``, 141 bytes, big-endian integers; absent optional fields are a 0 flag byte
/// followed by zeros):
///
/// ```
/// "OSEP" ‖ version 01 ‖ kind ‖ pairing id (32: SHA-256 of the SE's public key) ‖ challenge (16)
/// ‖ generation (8) ‖ AR flag ‖ AR digest (32) ‖ method ‖ transaction type ‖ card flag ‖ card (16)
/// ‖ amount flag ‖ amount (8) ‖ currency (2) ‖ nonce (16)
/// ```
///
/// The *generation* counts the Secure Enclave's persisted state changes: the Secure Element remembers the
/// highest it has seen, so a Secure Enclave restored from an older snapshot is detected. The AR digest is
/// SHA-256 of the Authorization Random, all zero with the flag 0 when there is none (reset).
public struct EnclaveStatement: Sendable, Hashable {
    /// What the statement says.
    public enum Kind: UInt8, Sendable, Hashable {
        /// The user authenticated for one payment: method, transaction type, card, amount.
        case paymentAuthorization = 1
        /// A card is being provisioned under the current Authorization Random.
        case provisioningBinding = 2
        /// The Secure Enclave's current Authorization Random and generation (at start-up, after a reset).
        case status = 3
    }

    static let magic: [UInt8] = Array("OSEP".utf8)
    static let version: UInt8 = 1
    /// The length of ``encoded``.
    public static let byteCount = 141

    public let kind: Kind
    public let pairingID: [UInt8]
    public let challenge: AuthorizationChallenge
    public let generation: UInt64
    public let authorizationRandomDigest: [UInt8]?
    public let method: AuthenticationMethod?
    public let transactionType: TransactionType?
    public let card: CardIdentifier?
    public let amount: PaymentAmount?
    /// A fresh random value of the Secure Enclave.
    public let nonce: [UInt8]

    init(
        kind: Kind, pairingID: [UInt8], challenge: AuthorizationChallenge, generation: UInt64,
        authorizationRandomDigest: [UInt8]?, method: AuthenticationMethod? = nil,
        transactionType: TransactionType? = nil, card: CardIdentifier? = nil, amount: PaymentAmount? = nil,
        nonce: [UInt8]
    ) {
        self.kind = kind
        self.pairingID = pairingID
        self.challenge = challenge
        self.generation = generation
        self.authorizationRandomDigest = authorizationRandomDigest
        self.method = method
        self.transactionType = transactionType
        self.card = card
        self.amount = amount
        self.nonce = nonce
    }

    /// The bytes the Secure Enclave signs.
    public var encoded: [UInt8] {
        var out = Self.magic + [Self.version, kind.rawValue] + pairingID + challenge.bytes
        out += bigEndian(generation, 8)
        out +=
            [authorizationRandomDigest == nil ? 0 : 1] + (authorizationRandomDigest ?? [UInt8](repeating: 0, count: 32))
        out += [method?.rawValue ?? 0, transactionType?.rawValue ?? 0]
        out += [card == nil ? 0 : 1] + (card?.bytes ?? [UInt8](repeating: 0, count: 16))
        out += [amount == nil ? 0 : 1] + bigEndian(UInt64(amount?.minorUnits ?? 0), 8)
        out += bigEndian(UInt64(amount?.currency ?? 0), 2)
        out += nonce
        return out
    }

    /// Parses and checks the form of a statement: exact length, known kind, method and type codes, flags 0
    /// or 1 with zero padding, and the fields each kind requires.
    public init(encoded bytes: some Collection<UInt8>) throws(SecureElementError) {
        let b = Array(bytes)
        func bad(_ why: String) -> SecureElementError {
            SecureElementError(.invalidAuthorization, "malformed Secure Enclave statement: \(why)")
        }
        guard b.count == Self.byteCount else { throw bad("it is \(b.count) bytes, not \(Self.byteCount)") }
        guard Array(b[0..<4]) == Self.magic, b[4] == Self.version else { throw bad("unknown format") }
        guard let kind = Kind(rawValue: b[5]) else { throw bad("unknown kind \(b[5])") }
        var offset = 6
        func take(_ n: Int) -> [UInt8] {
            defer { offset += n }
            return Array(b[offset..<(offset + n)])
        }
        func optional(_ n: Int) throws(SecureElementError) -> [UInt8]? {
            let flag = take(1)[0]
            let value = take(n)
            switch flag {
            case 0:
                guard value.allSatisfy({ $0 == 0 }) else { throw bad("an absent field is not zero") }
                return nil
            case 1: return value
            default: throw bad("a presence flag is \(flag)")
            }
        }
        pairingID = take(32)
        challenge = try AuthorizationChallenge(bytes: take(16))
        generation = readBigEndian(take(8))
        authorizationRandomDigest = try optional(32)
        let codes = take(2)
        method = codes[0] == 0 ? nil : AuthenticationMethod(rawValue: codes[0])
        transactionType = codes[1] == 0 ? nil : TransactionType(rawValue: codes[1])
        guard codes[0] == 0 || method != nil else { throw bad("unknown method \(codes[0])") }
        guard codes[1] == 0 || transactionType != nil else { throw bad("unknown transaction type \(codes[1])") }
        card = try optional(16).map { (bytes) throws(SecureElementError) in try CardIdentifier(bytes: bytes) }
        if let raw = try optional(10) {
            amount = try PaymentAmount(
                minorUnits: Int64(readBigEndian(Array(raw[0..<8]))), currency: UInt16(readBigEndian(Array(raw[8..<10])))
            )
        } else {
            amount = nil
        }
        nonce = take(16)
        self.kind = kind
        switch kind {
        case .paymentAuthorization:
            guard authorizationRandomDigest != nil, method != nil, transactionType != nil, card != nil else {
                throw bad("a payment authorization names the AR, method, transaction type and card")
            }
        case .provisioningBinding:
            guard authorizationRandomDigest != nil, method == nil, transactionType == nil, card == nil, amount == nil
            else { throw bad("a provisioning binding carries the AR only") }
        case .status:
            guard method == nil, transactionType == nil, card == nil, amount == nil else {
                throw bad("a status carries the AR and generation only")
            }
        }
    }
}

/// An ``EnclaveStatement`` with the Secure Enclave's ECDSA P-256 signature (made with the pairing key).
/// Wire form: the 141 statement bytes, then the DER signature.
public struct SignedEnclaveStatement: Sendable, Hashable {
    public let statement: EnclaveStatement
    public let signature: P256.Signing.ECDSASignature

    init(statement: EnclaveStatement, signature: P256.Signing.ECDSASignature) {
        self.statement = statement
        self.signature = signature
    }

    public var encoded: [UInt8] { statement.encoded + signature.derRepresentation }

    /// Parses the wire form; the signature is checked by the Secure Element, not here.
    public init(encoded bytes: some Collection<UInt8>) throws(SecureElementError) {
        let b = Array(bytes)
        guard b.count > EnclaveStatement.byteCount, b.count <= EnclaveStatement.byteCount + 72 else {
            throw SecureElementError(.invalidAuthorization, "a signed statement is 141 bytes and a DER signature")
        }
        statement = try EnclaveStatement(encoded: b[0..<EnclaveStatement.byteCount])
        do {
            signature = try P256.Signing.ECDSASignature(derRepresentation: b[EnclaveStatement.byteCount...])
        } catch {
            throw SecureElementError(.invalidAuthorization, "the statement's signature is not a DER ECDSA signature")
        }
    }

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.encoded == rhs.encoded }
    public func hash(into hasher: inout Hasher) { hasher.combine(encoded) }
}

// MARK: - Small byte helpers

func bigEndian(_ value: UInt64, _ count: Int) -> [UInt8] {
    (0..<count).map { UInt8(truncatingIfNeeded: value >> (8 * UInt64(count - 1 - $0))) }
}

func readBigEndian(_ bytes: [UInt8]) -> UInt64 {
    bytes.reduce(0) { $0 << 8 | UInt64($1) }
}
