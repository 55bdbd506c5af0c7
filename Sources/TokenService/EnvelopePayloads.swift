import Foundation
import Issuer
import OrchardCrypto

/// A minimal tag-length-value codec for the plaintexts inside an ``EncryptedEnvelope``: one tag byte, a two-byte
/// big-endian length, the value. Encoding writes straight into ``SecureBytes`` and decoding hands out
/// ``SecureBytes``, so key material never sits in an ordinary array. Strict: unknown, duplicate or
/// truncated items are refused.
enum SecretTLV {
    static func encode(_ items: [(tag: UInt8, value: SecureBytes)]) throws(TokenServiceError) -> SecureBytes {
        var total = 0
        for item in items {
            guard item.value.count <= 0xFFFF else {
                throw TokenServiceError(.invalidRequest, "a TLV value is too long")
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
            throw TokenServiceError(.cryptoFailure, "encoding an envelope payload failed")
        }
    }

    static func decode(_ data: SecureBytes, allowedTags: Set<UInt8>) throws(TokenServiceError) -> [UInt8: SecureBytes] {
        try data.withUnsafeBytes { (bytes) throws(TokenServiceError) -> [UInt8: SecureBytes] in
            var items: [UInt8: SecureBytes] = [:]
            var offset = 0
            while offset < bytes.count {
                guard bytes.count - offset >= 3 else {
                    throw TokenServiceError(.invalidRequest, "an envelope payload ends inside an item header")
                }
                let tag = bytes[offset]
                let length = Int(bytes[offset + 1]) << 8 | Int(bytes[offset + 2])
                offset += 3
                guard bytes.count - offset >= length else {
                    throw TokenServiceError(.invalidRequest, "an envelope payload item is truncated")
                }
                guard allowedTags.contains(tag) else {
                    throw TokenServiceError(.invalidRequest, "an envelope payload has an unknown item \(tag)")
                }
                guard items[tag] == nil else {
                    throw TokenServiceError(.invalidRequest, "an envelope payload repeats item \(tag)")
                }
                items[tag] = SecureBytes(UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + length)]))
                offset += length
            }
            return items
        }
    }

    static func text(_ value: String) -> SecureBytes { SecureBytes(Array(value.utf8)) }

    static func requireText(
        _ items: [UInt8: SecureBytes], _ tag: UInt8, _ name: String
    ) throws(TokenServiceError)
        -> String
    {
        let value = try require(items, tag, name)
        return value.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
    }

    static func require(
        _ items: [UInt8: SecureBytes], _ tag: UInt8, _ name: String
    ) throws(TokenServiceError)
        -> SecureBytes
    {
        guard let value = items[tag] else {
            throw TokenServiceError(.invalidRequest, "an envelope payload lacks its \(name)")
        }
        return value
    }
}

/// What the token service personalises a device's Secure Element with, sealed to the SE's key
/// (``EncryptedEnvelope`` label purpose ``purpose``). The card master keys exist in clear only inside the
/// HSM, inside this encoding, and inside the SE.
public struct SEPersonalisationData: Sendable, CustomStringConvertible, CustomDebugStringConvertible,
    CustomReflectable
{
    /// The envelope label purpose for personalisation.
    public static let purpose = "personalisation"

    public let tokenReference: String
    public let dpan: PrimaryAccountNumber
    /// PAN sequence number (EMV tag 5F34).
    public let panSequenceNumber: UInt8
    public let tokenExpiry: CardExpiry
    public let network: CardNetwork
    /// The card's proximity master key MK-AC (two-key TDES), derived from the token range's IMK.
    public let proximityMasterKey: SymmetricKey
    /// The card's remote-payment master key (two-key TDES), derived from the range's remote IMK.
    public let remoteMasterKey: SymmetricKey

    public init(
        tokenReference: String, dpan: PrimaryAccountNumber, panSequenceNumber: UInt8, tokenExpiry: CardExpiry,
        network: CardNetwork, proximityMasterKey: SymmetricKey, remoteMasterKey: SymmetricKey
    ) {
        self.tokenReference = tokenReference
        self.dpan = dpan
        self.panSequenceNumber = panSequenceNumber
        self.tokenExpiry = tokenExpiry
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

    /// The plaintext to seal.
    public func encoded() throws(TokenServiceError) -> SecureBytes {
        try SecretTLV.encode([
            (Tag.version, SecureBytes([1])),
            (Tag.tokenReference, SecretTLV.text(tokenReference)),
            (Tag.dpan, SecretTLV.text(dpan.digits)),
            (Tag.psn, SecureBytes([panSequenceNumber])),
            (Tag.expiry, SecretTLV.text(tokenExpiry.yymm)),
            (Tag.network, SecretTLV.text(network.name)),
            (Tag.proximityKey, proximityMasterKey.bytes),
            (Tag.remoteKey, remoteMasterKey.bytes),
        ])
    }

    /// Parses an opened personalisation envelope (the SE side).
    public init(decoding plaintext: SecureBytes) throws(TokenServiceError) {
        let items = try SecretTLV.decode(plaintext, allowedTags: Tag.all)
        guard try SecretTLV.require(items, Tag.version, "version").unsafeCopyOfBytes() == [1] else {
            throw TokenServiceError(.invalidRequest, "unknown personalisation format version")
        }
        tokenReference = try SecretTLV.requireText(items, Tag.tokenReference, "token reference")
        do {
            dpan = try PrimaryAccountNumber(try SecretTLV.requireText(items, Tag.dpan, "DPAN"))
            tokenExpiry = try CardExpiry(yymm: try SecretTLV.requireText(items, Tag.expiry, "expiry"))
        } catch let error as IssuerError {
            throw TokenServiceError(.invalidRequest, "the personalisation data is malformed: \(error.message)")
        } catch let error as TokenServiceError {
            throw error
        } catch {
            throw TokenServiceError(.invalidRequest, "the personalisation data is malformed")
        }
        let psn = try SecretTLV.require(items, Tag.psn, "PSN").unsafeCopyOfBytes()
        guard psn.count == 1 else { throw TokenServiceError(.invalidRequest, "a PSN is one byte") }
        panSequenceNumber = psn[0]
        network = CardNetwork(try SecretTLV.requireText(items, Tag.network, "network"))
        let proximity = try SecretTLV.require(items, Tag.proximityKey, "proximity key")
        let remote = try SecretTLV.require(items, Tag.remoteKey, "remote key")
        guard proximity.count == 16, remote.count == 16 else {
            throw TokenServiceError(.invalidRequest, "card master keys are 16 bytes")
        }
        proximityMasterKey = SymmetricKey(proximity)
        remoteMasterKey = SymmetricKey(remote)
    }

    public var description: String { "SEPersonalisationData(token: \(tokenReference), dpan: \(dpan.masked))" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}

/// The card data a wallet seals to the token service for Check Card (``EncryptedEnvelope`` label purpose
/// ``purpose``), so the Pay server that relays it cannot read it.
public struct CardDataPayload: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The envelope label purpose for card data.
    public static let purpose = "card-data"

    public let pan: PrimaryAccountNumber
    public let expiry: CardExpiry
    public let cardVerificationValue: CardVerificationValue
    public let cardholderName: String

    public init(
        pan: PrimaryAccountNumber, expiry: CardExpiry, cardVerificationValue: CardVerificationValue,
        cardholderName: String
    ) {
        self.pan = pan
        self.expiry = expiry
        self.cardVerificationValue = cardVerificationValue
        self.cardholderName = cardholderName
    }

    private enum Tag {
        static let version: UInt8 = 0x00
        static let pan: UInt8 = 0x30
        static let expiry: UInt8 = 0x31
        static let cvv: UInt8 = 0x32
        static let name: UInt8 = 0x33
        static let all: Set<UInt8> = [version, pan, expiry, cvv, name]
    }

    /// The plaintext to seal.
    public func encoded() throws(TokenServiceError) -> SecureBytes {
        try SecretTLV.encode([
            (Tag.version, SecureBytes([1])),
            (Tag.pan, SecretTLV.text(pan.digits)),
            (Tag.expiry, SecretTLV.text(expiry.yymm)),
            (Tag.cvv, cardVerificationValue.value),
            (Tag.name, SecretTLV.text(cardholderName)),
        ])
    }

    /// Parses an opened card-data envelope (the token service side).
    public init(decoding plaintext: SecureBytes) throws(TokenServiceError) {
        let items = try SecretTLV.decode(plaintext, allowedTags: Tag.all)
        guard try SecretTLV.require(items, Tag.version, "version").unsafeCopyOfBytes() == [1] else {
            throw TokenServiceError(.invalidRequest, "unknown card data format version")
        }
        do {
            pan = try PrimaryAccountNumber(try SecretTLV.requireText(items, Tag.pan, "card number"))
            expiry = try CardExpiry(yymm: try SecretTLV.requireText(items, Tag.expiry, "expiry"))
            cardVerificationValue = try CardVerificationValue(try SecretTLV.requireText(items, Tag.cvv, "CVV"))
        } catch let error as IssuerError {
            throw TokenServiceError(.invalidRequest, "the card data is malformed: \(error.message)")
        } catch let error as TokenServiceError {
            throw error
        } catch {
            throw TokenServiceError(.invalidRequest, "the card data is malformed")
        }
        cardholderName = try SecretTLV.requireText(items, Tag.name, "cardholder name")
        guard (1...100).contains(cardholderName.utf8.count) else {
            throw TokenServiceError(.invalidRequest, "a cardholder name is 1 to 100 bytes")
        }
    }

    public var description: String { "CardDataPayload(pan: \(pan.masked), <cvv redacted>)" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}
