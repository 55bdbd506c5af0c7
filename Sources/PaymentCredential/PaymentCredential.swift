import CardBasics
import Foundation
public import OrchardCrypto

/// What a Secure Element tells the Pay server about one in-app or web payment, before it is signed and
/// sealed (``SealedPaymentCredential``). Holds a DPAN: `description`, `debugDescription` and the mirror show
/// the merchant, amount and currency only.
///
/// Encoded form (``encoded()``), a sequence of `tag (1) ‖ length (2, big-endian) ‖ value`, tags strictly
/// ascending, each at most once, no others:
///
/// | tag | value | |
/// |---|---|---|
/// | 00 | version `01` | required |
/// | 01 | nonce, 32 bytes, as the Pay server issued it | required |
/// | 02 | merchant ID, UTF-8 (`merchant.` + reverse DNS) | required |
/// | 03 | app ID (in-app) or the page's domain (web), UTF-8 | required |
/// | 04 | DPAN, 12 to 19 ASCII digits | required |
/// | 05 | token expiry YYMMDD, 6 ASCII digits | required |
/// | 06 | remote cryptogram, 20 bytes (``RemoteCryptogram``) | required |
/// | 07 | ECI, 1 or 2 ASCII digits | required |
/// | 08 | amount, 8 bytes big-endian minor units | required |
/// | 09 | currency, 2 bytes big-endian ISO 4217 numeric | required |
/// | 0A | SHA-256 of the request's applicationData, 32 bytes | only when the request had applicationData |
/// | 0B | transaction type: `02` in-app, `03` web | required |
/// | 0C | the merchant session's identifier, ASCII (`SSH…_…`) | version 2 (web) only, required there |
/// | 0D | the merchant session's nonce, 8 lower-case hex digits | version 2 (web) only, required there |
///
/// Version `02` is a web credential bound to a merchant session (docs/web.md): it carries tags 0C and 0D and
/// transaction type `03`; version `01` carries neither.
public struct PaymentCredential: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// How the payment was made.
    public enum Channel: UInt8, Sendable, Hashable {
        case inApp = 2
        case web = 3

        /// `in-app` or `web`.
        public var name: String { self == .inApp ? "in-app" : "web" }
    }

    /// The version of a credential without a merchant session (in-app).
    public static let version: UInt8 = 1
    /// The version of a web credential bound to a merchant session.
    public static let sessionVersion: UInt8 = 2
    public static let nonceByteCount = 32

    /// The merchant session a web credential is bound to: the session's identifier and nonce as the gateway
    /// issued them (the 32-byte device-bound nonce stays in ``PaymentCredential/nonce``).
    public struct MerchantSessionBinding: Sendable, Hashable {
        public let identifier: String
        public let nonce: String

        /// Checks the forms: the identifier 1 to 128 printable ASCII bytes, the nonce 8 lower-case hex digits.
        public init(identifier: String, nonce: String) throws(PaymentCredentialError) {
            guard (1...128).contains(identifier.utf8.count), identifier.utf8.allSatisfy({ (0x21...0x7E).contains($0) })
            else {
                throw PaymentCredentialError(.invalidArgument, "the merchant session identifier is 1-128 ASCII bytes")
            }
            guard nonce.utf8.count == 8,
                nonce.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) })
            else {
                throw PaymentCredentialError(.invalidArgument, "the merchant session nonce is 8 lower-case hex digits")
            }
            self.identifier = identifier
            self.nonce = nonce
        }
    }

    public let nonce: [UInt8]
    public let merchantIdentifier: String
    public let applicationIdentifier: String
    /// The device account number (ASCII digits).
    public let dpan: SecureBytes
    /// YYMMDD.
    public let expiry: String
    public let cryptogram: RemoteCryptogram
    public let eci: String
    public let amount: Int64
    public let currency: UInt16
    public let applicationDataHash: [UInt8]?
    public let channel: Channel
    /// The merchant session (web, version 2); nil for in-app.
    public let merchantSession: MerchantSessionBinding?

    /// Checks every field's form; throws ``PaymentCredentialError/Code/invalidArgument`` naming the field.
    public init(
        nonce: [UInt8], merchantIdentifier: String, applicationIdentifier: String, dpan: SecureBytes,
        expiry: String, cryptogram: RemoteCryptogram, eci: String, amount: Int64, currency: UInt16,
        applicationDataHash: [UInt8]?, channel: Channel, merchantSession: MerchantSessionBinding? = nil
    ) throws(PaymentCredentialError) {
        func bad(_ why: String) -> PaymentCredentialError { PaymentCredentialError(.invalidArgument, why) }
        guard nonce.count == Self.nonceByteCount else { throw bad("the nonce is \(Self.nonceByteCount) bytes") }
        guard (1...128).contains(merchantIdentifier.utf8.count) else { throw bad("the merchant ID is 1-128 bytes") }
        guard (1...255).contains(applicationIdentifier.utf8.count) else { throw bad("the app ID is 1-255 bytes") }
        let digits = dpan.withUnsafeBytes { bytes in (12...19).contains(bytes.count) && bytes.allSatisfy(Self.isDigit) }
        guard digits else { throw bad("the DPAN is 12 to 19 digits") }
        guard expiry.utf8.count == 6, expiry.utf8.allSatisfy(Self.isDigit) else { throw bad("the expiry is YYMMDD") }
        guard (1...2).contains(eci.utf8.count), eci.utf8.allSatisfy(Self.isDigit) else {
            throw bad("the ECI is 1 or 2 digits")
        }
        guard let known = Currency(numericCode: Int(currency)) else {
            throw bad("the currency is an ISO 4217 numeric code")
        }
        // CardBasics' one rule for an amount's bounds.
        guard (try? Money(minorUnits: amount, currency: known)) != nil else {
            throw bad("the amount is 1 to 999,999,999,999 minor units")
        }
        guard applicationDataHash == nil || applicationDataHash?.count == 32 else {
            throw bad("the applicationData hash is 32 bytes")
        }
        guard merchantSession == nil || channel == .web else {
            throw bad("only a web credential has a merchant session")
        }
        self.merchantSession = merchantSession
        self.nonce = nonce
        self.merchantIdentifier = merchantIdentifier
        self.applicationIdentifier = applicationIdentifier
        self.dpan = dpan
        self.expiry = expiry
        self.cryptogram = cryptogram
        self.eci = eci
        self.amount = amount
        self.currency = currency
        self.applicationDataHash = applicationDataHash
        self.channel = channel
    }

    private enum Tag {
        static let version: UInt8 = 0x00
        static let nonce: UInt8 = 0x01
        static let merchant: UInt8 = 0x02
        static let application: UInt8 = 0x03
        static let dpan: UInt8 = 0x04
        static let expiry: UInt8 = 0x05
        static let cryptogram: UInt8 = 0x06
        static let eci: UInt8 = 0x07
        static let amount: UInt8 = 0x08
        static let currency: UInt8 = 0x09
        static let applicationData: UInt8 = 0x0A
        static let channel: UInt8 = 0x0B
        static let sessionIdentifier: UInt8 = 0x0C
        static let sessionNonce: UInt8 = 0x0D
        static let last: UInt8 = 0x0D
    }

    /// The encoded form (see the type's documentation); secret because it holds the DPAN.
    public func encoded() -> SecureBytes {
        var out: [UInt8] = []
        func put(_ tag: UInt8, _ value: [UInt8]) {
            out += [tag, UInt8(value.count >> 8), UInt8(value.count & 0xFF)] + value
        }
        put(Tag.version, [merchantSession == nil ? Self.version : Self.sessionVersion])
        put(Tag.nonce, nonce)
        put(Tag.merchant, Array(merchantIdentifier.utf8))
        put(Tag.application, Array(applicationIdentifier.utf8))
        var pan = dpan.unsafeCopyOfBytes()
        put(Tag.dpan, pan)
        Self.wipe(&pan)
        put(Tag.expiry, Array(expiry.utf8))
        put(Tag.cryptogram, cryptogram.bytes)
        put(Tag.eci, Array(eci.utf8))
        put(Tag.amount, (0..<8).map { UInt8(truncatingIfNeeded: UInt64(amount) >> (8 * UInt64(7 - $0))) })
        put(Tag.currency, [UInt8(currency >> 8), UInt8(currency & 0xFF)])
        if let applicationDataHash { put(Tag.applicationData, applicationDataHash) }
        put(Tag.channel, [channel.rawValue])
        if let merchantSession {
            put(Tag.sessionIdentifier, Array(merchantSession.identifier.utf8))
            put(Tag.sessionNonce, Array(merchantSession.nonce.utf8))
        }
        defer { Self.wipe(&out) }
        return SecureBytes(out)
    }

    /// Parses and checks the encoded form: known version, every required tag once and in order, no unknown
    /// tag, no trailing bytes, every field well formed.
    public init(encoded: SecureBytes) throws(PaymentCredentialError) {
        var bytes = encoded.unsafeCopyOfBytes()
        defer { Self.wipe(&bytes) }
        func bad(_ why: String) -> PaymentCredentialError {
            PaymentCredentialError(.malformed, "malformed payment credential: \(why)")
        }
        var fields: [UInt8: [UInt8]] = [:]
        var offset = 0
        var previous: Int = -1
        while offset < bytes.count {
            guard bytes.count - offset >= 3 else { throw bad("a truncated field header") }
            let tag = bytes[offset]
            let length = Int(bytes[offset + 1]) << 8 | Int(bytes[offset + 2])
            offset += 3
            guard bytes.count - offset >= length else { throw bad("a field runs past the end") }
            guard Int(tag) > previous else { throw bad("tags are repeated or out of order") }
            guard tag <= Tag.last else { throw bad("unknown tag \(tag)") }
            previous = Int(tag)
            fields[tag] = Array(bytes[offset..<(offset + length)])
            offset += length
        }
        defer {
            if var pan = fields[Tag.dpan] { Self.wipe(&pan) }
        }
        func required(_ tag: UInt8, _ name: String) throws(PaymentCredentialError) -> [UInt8] {
            guard let value = fields[tag] else { throw bad("the \(name) is missing") }
            return value
        }
        let version = try required(Tag.version, "version")
        guard version == [Self.version] || version == [Self.sessionVersion] else {
            throw PaymentCredentialError(.unsupportedVersion, "this payment credential version is not supported")
        }
        func text(_ tag: UInt8, _ name: String) throws(PaymentCredentialError) -> String {
            guard let value = String(validating: try required(tag, name), as: UTF8.self) else {
                throw bad("the \(name) is not UTF-8")
            }
            return value
        }
        let amountBytes = try required(Tag.amount, "amount")
        let currencyBytes = try required(Tag.currency, "currency")
        let channelBytes = try required(Tag.channel, "transaction type")
        guard amountBytes.count == 8, currencyBytes.count == 2, channelBytes.count == 1,
            let channel = Channel(rawValue: channelBytes[0])
        else { throw bad("the amount, currency or transaction type has the wrong form") }
        let rawAmount = amountBytes.reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        guard rawAmount <= UInt64(Money.maximumMinorUnits) else { throw bad("the amount is out of range") }
        var session: MerchantSessionBinding?
        if version == [Self.sessionVersion] {
            guard channelBytes == [Channel.web.rawValue] else {
                throw bad("a version 2 credential is a web credential")
            }
            do {
                session = try MerchantSessionBinding(
                    identifier: try text(Tag.sessionIdentifier, "merchant session identifier"),
                    nonce: try text(Tag.sessionNonce, "merchant session nonce"))
            } catch  where error.code == .invalidArgument {
                throw bad(error.message)
            }
        } else {
            guard fields[Tag.sessionIdentifier] == nil, fields[Tag.sessionNonce] == nil else {
                throw bad("a version 1 credential has no merchant session")
            }
        }
        do {
            try self.init(
                nonce: try required(Tag.nonce, "nonce"), merchantIdentifier: try text(Tag.merchant, "merchant ID"),
                applicationIdentifier: try text(Tag.application, "app ID"),
                dpan: SecureBytes(try required(Tag.dpan, "DPAN")), expiry: try text(Tag.expiry, "expiry"),
                cryptogram: try RemoteCryptogram(bytes: try required(Tag.cryptogram, "cryptogram")),
                eci: try text(Tag.eci, "ECI"), amount: Int64(rawAmount),
                currency: UInt16(currencyBytes[0]) << 8 | UInt16(currencyBytes[1]),
                applicationDataHash: fields[Tag.applicationData], channel: channel, merchantSession: session)
        } catch  where error.code == .invalidArgument {
            throw bad(error.message)
        }
    }

    /// The DPAN as a string: only for building the merchant's payment data.
    public var dpanString: String { dpan.withUnsafeBytes { String(decoding: $0, as: UTF8.self) } }

    public var description: String {
        "PaymentCredential(\(merchantIdentifier), \(amount) (currency \(currency)), \(channel.name))"
    }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }

    static func isDigit(_ byte: UInt8) -> Bool { (0x30...0x39).contains(byte) }

    static func wipe(_ bytes: inout [UInt8]) {
        bytes.withUnsafeMutableBytes { buffer in
            guard let base = buffer.baseAddress else { return }
            memset(base, 0, buffer.count)
        }
    }
}
