import CardBasics
import EMV
public import Foundation
public import OrchardCrypto

/// The 20-byte remote (in-app and web) payment cryptogram a Secure Element computes with the card's remote
/// master key and the token service verifies; the Pay server puts it, base64, in the token's
/// `paymentData.onlinePaymentCryptogram`.
///
/// Layout (``bytes``):
///
/// | offset | length | field |
/// |---|---|---|
/// | 0 | 1 | version, `01` |
/// | 1 | 1 | key index: which remote issuer master key of the token range (Orchard: `01`) |
/// | 2 | 2 | ATC, big-endian (the card's one counter, shared with contactless) |
/// | 4 | 8 | nonce binding N = the first 8 bytes of SHA-256(Pay server nonce) |
/// | 12 | 8 | MAC |
///
/// MAC = ISO/IEC 9797-1 MAC algorithm 3 (retail MAC, padding method 2) under the session key SK = EMV
/// common session key (EMV Book 2 A1.3) of the card's remote master key MK and the ATC, over
///
/// ```
/// version ‖ key index ‖ ATC (2) ‖ amount (n12 BCD, 6) ‖ currency (n4 BCD, 2) ‖ N (8) ‖ SHA-256(merchant ID) (32)
/// ```
///
/// The nonce enters through N because the token service never sees the nonce: the Pay server checks that N
/// is the binding of the nonce it issued (so a cryptogram cannot move to another credential), and the MAC
/// makes N, amount, currency, merchant and ATC unchangeable without MK.
public struct RemoteCryptogram: Sendable, Hashable, CustomStringConvertible {
    public static let byteCount = 20
    public static let version: UInt8 = 0x01
    /// The key index Orchard's token ranges use.
    public static let defaultKeyIndex: UInt8 = 0x01

    public let keyIndex: UInt8
    public let atc: UInt16
    /// The first 8 bytes of SHA-256 of the nonce.
    public let nonceBinding: [UInt8]
    public let mac: [UInt8]

    /// Parses the 20-byte form; checks the length and version only (the MAC is checked by ``verify``).
    public init(bytes: some Collection<UInt8>) throws(PaymentCredentialError) {
        let b = Array(bytes)
        guard b.count == Self.byteCount else {
            throw PaymentCredentialError(.malformed, "a remote cryptogram is \(Self.byteCount) bytes, not \(b.count)")
        }
        guard b[0] == Self.version else {
            throw PaymentCredentialError(.unsupportedVersion, "remote cryptogram version \(b[0]) is not supported")
        }
        keyIndex = b[1]
        atc = UInt16(b[2]) << 8 | UInt16(b[3])
        nonceBinding = Array(b[4..<12])
        mac = Array(b[12..<20])
    }

    private init(keyIndex: UInt8, atc: UInt16, nonceBinding: [UInt8], mac: [UInt8]) {
        self.keyIndex = keyIndex
        self.atc = atc
        self.nonceBinding = nonceBinding
        self.mac = mac
    }

    /// The 20 bytes.
    public var bytes: [UInt8] { [Self.version, keyIndex, UInt8(atc >> 8), UInt8(atc & 0xFF)] + nonceBinding + mac }

    /// Shows the version, key index and ATC only.
    public var description: String { "RemoteCryptogram(v\(Self.version), key \(keyIndex), ATC \(atc))" }

    /// N: the first 8 bytes of SHA-256(nonce).
    public static func nonceBinding(for nonce: some DataProtocol) -> [UInt8] { Array(SHA256.hash(nonce).prefix(8)) }

    /// Whether this cryptogram is bound to `nonce` (constant time).
    public func isBound(toNonce nonce: some DataProtocol) -> Bool {
        constantTimeEquals(nonceBinding, Self.nonceBinding(for: nonce))
    }

    /// Computes the cryptogram (the Secure Element's side).
    ///
    /// - Parameters:
    ///   - masterKey: the card's remote master key (16 bytes, two-key TDES).
    ///   - amount: minor units, 0 to 999,999,999,999.
    ///   - currency: ISO 4217 numeric, 1 to 999.
    public static func generate(
        masterKey: SymmetricKey, keyIndex: UInt8 = defaultKeyIndex, atc: UInt16, amount: Int64, currency: UInt16,
        nonce: some DataProtocol, merchantIdentifier: String
    ) throws(PaymentCredentialError) -> RemoteCryptogram {
        let binding = nonceBinding(for: nonce)
        let mac = try computeMAC(
            masterKey: masterKey, keyIndex: keyIndex, atc: atc, amount: amount, currency: currency,
            nonceBinding: binding, merchantIdentifierHash: SHA256.hash(Array(merchantIdentifier.utf8)))
        return RemoteCryptogram(keyIndex: keyIndex, atc: atc, nonceBinding: binding, mac: mac)
    }

    /// Computes the cryptogram for a merchant known by its wire identifier, the SHA-256 of its ID (a web payment:
    /// the merchant session names the merchant by the upper-case hex of that hash).
    public static func generate(
        masterKey: SymmetricKey, keyIndex: UInt8 = defaultKeyIndex, atc: UInt16, amount: Int64, currency: UInt16,
        nonce: some DataProtocol, merchantIdentifierHash: [UInt8]
    ) throws(PaymentCredentialError) -> RemoteCryptogram {
        let binding = nonceBinding(for: nonce)
        let mac = try computeMAC(
            masterKey: masterKey, keyIndex: keyIndex, atc: atc, amount: amount, currency: currency,
            nonceBinding: binding, merchantIdentifierHash: merchantIdentifierHash)
        return RemoteCryptogram(keyIndex: keyIndex, atc: atc, nonceBinding: binding, mac: mac)
    }

    /// Checks the MAC against the transaction the verifier knows (the token service's side). Returns false
    /// for any other amount, currency, merchant, ATC, nonce binding or key; throws only for a key or value
    /// out of range.
    public func verify(
        masterKey: SymmetricKey, amount: Int64, currency: UInt16, merchantIdentifierHash: [UInt8]
    ) throws(PaymentCredentialError) -> Bool {
        let expected = try Self.computeMAC(
            masterKey: masterKey, keyIndex: keyIndex, atc: atc, amount: amount, currency: currency,
            nonceBinding: nonceBinding, merchantIdentifierHash: merchantIdentifierHash)
        return constantTimeEquals(expected, mac)
    }

    static func computeMAC(
        masterKey: SymmetricKey, keyIndex: UInt8, atc: UInt16, amount: Int64, currency: UInt16,
        nonceBinding: [UInt8], merchantIdentifierHash: [UInt8]
    ) throws(PaymentCredentialError) -> [UInt8] {
        guard let known = Currency(numericCode: Int(currency)) else {
            throw PaymentCredentialError(.invalidArgument, "a currency is an ISO 4217 numeric code")
        }
        // CardBasics' one rule for an amount's bounds.
        guard (try? Money(minorUnits: amount, currency: known)) != nil else {
            throw PaymentCredentialError(.invalidArgument, "an amount is 1 to 999,999,999,999 minor units")
        }
        guard merchantIdentifierHash.count == 32, nonceBinding.count == 8 else {
            throw PaymentCredentialError(.invalidArgument, "the merchant hash is 32 bytes and the nonce binding 8")
        }
        guard masterKey.byteCount == 16 else {
            throw PaymentCredentialError(.invalidArgument, "the remote master key is 16 bytes (two-key TDES)")
        }
        var input: [UInt8] = [version, keyIndex, UInt8(atc >> 8), UInt8(atc & 0xFF)]
        input += bcd(UInt64(amount), digits: 12) + bcd(UInt64(currency), digits: 4)
        input += nonceBinding + merchantIdentifierHash
        do {
            let sessionKey = try EMVKeyDerivation.commonSessionKey(masterKey: masterKey, atc: atc)
            return try ApplicationCryptogram.mac(key: sessionKey, data: input, padding: .method2)
        } catch {
            throw PaymentCredentialError(.cryptoFailure, "the remote cryptogram MAC failed: \(error.message)")
        }
    }

    /// `value` as `digits` BCD digits (digits even), most significant first.
    static func bcd(_ value: UInt64, digits: Int) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: digits / 2)
        var rest = value
        for index in stride(from: out.count - 1, through: 0, by: -1) {
            let low = UInt8(rest % 10)
            rest /= 10
            let high = UInt8(rest % 10)
            rest /= 10
            out[index] = high << 4 | low
        }
        return out
    }
}

/// What an acquirer sends the token service with a remote cryptogram (`CryptogramSubmission.transactionData`
/// of kind `remote`): the transaction as the merchant's acquirer knows it, 42 bytes:
/// `SHA-256(merchant ID) (32) ‖ amount (8, big-endian minor units) ‖ currency (2, big-endian ISO 4217 numeric)`.
public struct RemoteTransactionData: Sendable, Hashable {
    public static let byteCount = 42
    public let merchantIdentifierHash: [UInt8]
    public let amount: Int64
    public let currency: UInt16

    public init(merchantIdentifier: String, amount: Int64, currency: UInt16) {
        merchantIdentifierHash = SHA256.hash(Array(merchantIdentifier.utf8))
        self.amount = amount
        self.currency = currency
    }

    public init(encoded bytes: some Collection<UInt8>) throws(PaymentCredentialError) {
        let b = Array(bytes)
        guard b.count == Self.byteCount else {
            throw PaymentCredentialError(.malformed, "remote transaction data is \(Self.byteCount) bytes")
        }
        merchantIdentifierHash = Array(b[0..<32])
        let raw = b[32..<40].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        guard raw <= UInt64(Money.maximumMinorUnits) else {
            throw PaymentCredentialError(.malformed, "the amount in remote transaction data is out of range")
        }
        amount = Int64(raw)
        currency = UInt16(b[40]) << 8 | UInt16(b[41])
    }

    public var encoded: [UInt8] {
        var out = merchantIdentifierHash
        for shift in stride(from: 56, through: 0, by: -8) {
            out.append(UInt8(truncatingIfNeeded: UInt64(amount) >> UInt64(shift)))
        }
        return out + [UInt8(currency >> 8), UInt8(currency & 0xFF)]
    }
}
