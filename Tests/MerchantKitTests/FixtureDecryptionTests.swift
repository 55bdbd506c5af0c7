import Foundation
import OrchardCrypto
import OrchardFixtures
import PaymentToken
import Testing

@testable import MerchantKit

/// Security case A1: the real Apple tokens decrypt to the values in expected.json.
@Suite("Real Apple tokens: payload decryption")
struct FixtureDecryptionTests {
    struct Expected: Decodable {
        let version: String
        let merchant_id_ext: String?
        let shared_secret_b64: String?
        let symmetric_key_b64: String?
        let signing_time: String
    }

    static func expected() throws -> [String: Expected] {
        try JSONDecoder().decode([String: Expected].self, from: Fixtures.data("apple-pay/expected.json"))
    }

    static func expectedPayload(_ name: String) throws -> JSONValue {
        let raw = try JSONSerialization.jsonObject(with: Fixtures.data("apple-pay/expected.json")) as! [String: Any]
        let payload = (raw[name] as! [String: Any])["payment_data"]!
        let data = try JSONSerialization.data(withJSONObject: payload)
        return try StrictJSONParser.parse(data, limits: .paymentToken)
    }

    /// The gala identities, with the merchant-ID hash from expected.json (the certificate path is tested
    /// with OrchardX509).
    static func galaIdentity(_ name: String) throws -> MerchantIdentity {
        let key = try P256.KeyAgreement.PrivateKey(
            pemRepresentation: Fixtures.string("apple-pay/\(name)/private_key.pem"))
        let ext = try #require(try expected()[name]?.merchant_id_ext)
        let hash = try #require(StrictEncoding.hexDecode(ext))
        return try MerchantIdentity(key: .ec(key), merchantIdentifierHash: hash)
    }

    @Test("A1: the real EC_v1 tokens decrypt to their published values", arguments: ["gala-2015", "gala-2023"])
    func ecV1(name: String) throws {
        let expected = try #require(try Self.expected()[name])
        let token = try PaymentToken(jsonBytes: Fixtures.data("apple-pay/\(name)/token.json"))
        let output = try PayloadDecryption(identities: [Self.galaIdentity(name)]).decrypt(token.paymentData)
        #expect(output.sharedSecret?.unsafeCopyOfBytes() == Array(Data(base64Encoded: expected.shared_secret_b64!)!))
        #expect(
            output.symmetricKey.bytes.unsafeCopyOfBytes() == Array(Data(base64Encoded: expected.symmetric_key_b64!)!))
        let payload = try DecryptedPaymentData(plaintext: output.plaintext)
        let expectedPayload = try DecryptedPaymentData(json: Self.expectedPayload(name))
        #expect(payload.applicationPrimaryAccountNumber == expectedPayload.applicationPrimaryAccountNumber)
        #expect(payload.transactionAmount == 100)
        #expect(payload.currencyCode == "840")
        #expect(payload.credential == expectedPayload.credential)
        #expect(payload.applicationExpirationDate == expectedPayload.applicationExpirationDate)
        // Redaction: the DPAN and cryptogram never show in descriptions.
        #expect(!"\(payload)".contains(payload.applicationPrimaryAccountNumber))
        #expect(!String(reflecting: payload).contains("Cryptogram"))
    }

    @Test func rsaV1() throws {
        let key = try RSA.PrivateKey(pemRepresentation: Fixtures.string("apple-pay/basis-rsa/private.key"))
        // RSA_v1 does not use the merchant identifier hash; any 32 bytes will do here.
        let identity = try MerchantIdentity(key: .rsa(key), merchantIdentifier: "unused")
        let token = try PaymentToken(jsonBytes: Fixtures.data("apple-pay/basis-rsa/token.json"))
        let output = try PayloadDecryption(identities: [identity]).decrypt(token.paymentData)
        #expect(output.symmetricKey.byteCount == 16)
        let payload = try DecryptedPaymentData(plaintext: output.plaintext)
        let expectedPayload = try DecryptedPaymentData(json: Self.expectedPayload("basis-rsa"))
        #expect(payload.applicationPrimaryAccountNumber == expectedPayload.applicationPrimaryAccountNumber)
        #expect(payload.credential == expectedPayload.credential)
    }

    @Test("A4: another merchant's key has no matching hash; forced, the GCM tag fails")
    func wrongMerchantKeyHasNoMatchingHash() throws {
        let token = try PaymentToken(jsonBytes: Fixtures.data("apple-pay/gala-2015/token.json"))
        let other = try Self.galaIdentity("gala-2023")
        #expect(throws: MerchantKitError(.unknownPublicKeyHash, "")) {
            try PayloadDecryption(identities: [other]).decrypt(token.paymentData)
        }
        // Forced: B's key under A's publicKeyHash → GCM tag failure (A4).
        let forced = try MerchantIdentityForcing.identity(other, claiming: token.paymentData.header.publicKeyHash)
        #expect(throws: MerchantKitError(.decryptionFailed, "")) {
            try PayloadDecryption(identities: [forced]).decrypt(token.paymentData)
        }
    }
}

/// Builds an identity that claims another key's publicKeyHash, to force a decryption with the wrong key.
enum MerchantIdentityForcing {
    static func identity(_ identity: MerchantIdentity, claiming hash: [UInt8]) throws -> MerchantIdentity {
        MerchantIdentity(
            unchecked: identity.key, publicKeyHash: hash, merchantIdentifierHash: identity.merchantIdentifierHash)
    }
}
