import Foundation
import MerchantKit
import OrchardCrypto
import OrchardHTTP
import OrchardRuntime
import OrchardServices
import OrchardStore
import OrchardX509
import PayAPI
import PayServer
import PaymentToken
import Testing

/// Merchant tokens at the Pay server's exchange: a recurring, automatic reload or deferred payment's
/// token carries `merchantTokenIdentifier` and `merchantTokenMetadata`, minted once per merchant and device account
/// (token reference), never from a card number.
@Suite("Pay server: merchant tokens for the version 14 payment types", .serialized)
struct MerchantTokenExchangeTests {
    static let other = "merchant.dev.orchard.other"

    /// Registers `other` with a P-256 processing certificate and entitles the fixture's app to it; its decryptor.
    static func otherMerchant(_ f: InAppFixture, store: Store) async throws -> PaymentTokenDecryptor {
        let registry = MerchantRegistry(
            store: store,
            authority: try CertificateAuthority.load(named: PayService.Files.merchantCA, from: f.directory),
            clock: SystemClock(), random: SystemRandom())
        try await registry.registerMerchant(identifier: other, displayName: "Other Store")
        let key = try P256.Signing.PrivateKey()
        let chain = try await registry.issuePaymentProcessingCertificate(
            for: try CertificateSigningRequest.create(
                subject: DistinguishedName([.userID(other), .commonName("Orchard Pay Payment Processing:\(other)")]),
                key: CertificatePrivateKey(key)),
            merchantIdentifier: other)
        try await registry.entitle(application: InAppFixture.app, merchantIdentifiers: [other])
        return try f.decryptor(try MerchantIdentity(certificate: chain[0], privateKeyPEM: try key.pemRepresentation))
    }

    /// A card of `device` as the Pay server keeps it after provisioning (display data and state).
    static func card(_ reference: String, of device: String, state: String = "active", in store: Store) async throws {
        try await store.write { db in
            _ = try db.execute(
                """
                INSERT INTO device_cards (token_reference, device_id, network, type, suffix, description, state,
                    added_at) VALUES (?, ?, 'visa', 'credit', '1111', 'Orchard Bank Visa Classic', ?, 0)
                """, [.text(reference), .text(device), .text(state)])
        }
    }

    func exchange(
        _ f: InAppFixture, _ device: InAppTestDevice, merchant: String = InAppFixture.merchant,
        merchantToken: MerchantTokenRequest?
    ) async throws -> HTTPResponse {
        let sealed = try f.credential(try await f.nonce(for: device), signer: device, merchant: merchant)
        return try await device.client.post(
            f.base + PayAPI.Route.paymentCredential,
            json: PaymentCredentialExchange(
                credential: Data(sealed).base64EncodedString(), paymentMethod: nil, merchantToken: merchantToken))
    }

    func identifier(
        _ response: HTTPResponse, _ decryptor: PaymentTokenDecryptor
    ) throws -> (String?, DecryptedPaymentData.MerchantTokenMetadata?) {
        try #require(response.status == .ok, "\(String(decoding: response.body, as: UTF8.self))")
        let payment = try decryptor.decrypt(try PaymentToken(jsonBytes: Array(response.body))).payment
        #expect(payment.applicationPrimaryAccountNumber == InAppFixture.dpan)  // the payment itself is unchanged
        return (payment.merchantTokenIdentifier, payment.merchantTokenMetadata)
    }

    @Test(
        "A recurring payment's token carries a merchant token: the same for the same merchant and card, another for another merchant; none for an immediate payment"
    )
    func sameMerchantSameCardSameToken() async throws {
        let f = try await InAppFixture()
        let phone = try await f.device("phone-a")
        let store = try f.payStore()
        try await Self.card("tok_phone_a_1", of: "phone-a", in: store)
        try await Self.card("tok_phone_a_2", of: "phone-a", in: store)
        let otherDecryptor = try await Self.otherMerchant(f, store: store)
        let demo = try f.decryptor()

        let (first, metadata) = try identifier(
            try await exchange(f, phone, merchantToken: .init(kind: .recurring, tokenReference: "tok_phone_a_1")), demo)
        let minted = try #require(first)
        #expect(minted.hasPrefix("MTK") && minted.count == 29, "\(minted)")
        #expect(!minted.contains(InAppFixture.dpan) && !minted.contains("1111"))
        #expect(
            metadata
                == .init(
                    cardArt: [],
                    cardMetadata: .init(
                        cardCountry: nil, expirationDate: nil, fpanSuffix: "1111",
                        longDescription: "Orchard Bank Visa Classic", shortDescription: "Orchard Bank Visa Classic")))
        // The same merchant and card, whatever the payment type: the same merchant token.
        for kind in MerchantTokenRequest.Kind.allCases {
            let (again, _) = try identifier(
                try await exchange(f, phone, merchantToken: .init(kind: kind, tokenReference: "tok_phone_a_1")), demo)
            #expect(again == minted, "\(kind)")
        }
        // Another card of the same device, and another merchant with the same card: other merchant tokens.
        let (otherCard, _) = try identifier(
            try await exchange(f, phone, merchantToken: .init(kind: .recurring, tokenReference: "tok_phone_a_2")), demo)
        let (otherMerchant, _) = try identifier(
            try await exchange(
                f, phone, merchant: Self.other,
                merchantToken: .init(kind: .deferred, tokenReference: "tok_phone_a_1")), otherDecryptor)
        #expect(otherCard != nil && otherCard != minted)
        #expect(otherMerchant != nil && otherMerchant != minted && otherMerchant != otherCard)
        // An immediate payment: a device token only.
        let (none, noMetadata) = try identifier(try await exchange(f, phone, merchantToken: nil), demo)
        #expect(none == nil && noMetadata == nil)
        // Kept once per merchant and card, and nothing of the payment beside it.
        let rows = try await store.read { db in
            try db.query("SELECT merchant_identifier, token_reference, identifier FROM merchant_tokens", []) {
                [try $0.string(0), try $0.string(1), try $0.string(2)]
            }
        }
        #expect(rows.count == 3)
        #expect(!rows.joined().contains(InAppFixture.dpan))
        await store.close()
        await f.close()
    }

    @Test(
        "A merchant token for another device's card, an unknown or a suspended card, or an unknown kind is refused and mints nothing; the nonce stays usable"
    )
    func refusedMerchantTokenRequests() async throws {
        let f = try await InAppFixture()
        let phone = try await f.device("phone-a")
        _ = try await f.device("phone-b")
        let store = try f.payStore()
        try await Self.card("tok_phone_b", of: "phone-b", in: store)
        try await Self.card("tok_suspended", of: "phone-a", state: "suspended", in: store)
        let nonce = try await f.nonce(for: phone)
        let sealed = Data(try f.credential(nonce, signer: phone)).base64EncodedString()
        func send(_ body: some Encodable) async throws -> HTTPResponse {
            try await phone.client.post(f.base + PayAPI.Route.paymentCredential, json: body)
        }
        let cases: [(MerchantTokenRequest, HTTPStatus, String)] = [
            (.init(kind: .recurring, tokenReference: "tok_phone_b"), .badRequest, "invalidRequest"),
            (.init(kind: .recurring, tokenReference: "tok_nobody"), .badRequest, "invalidRequest"),
            (.init(kind: .automaticReload, tokenReference: "tok_suspended"), .forbidden, "notPermitted"),
        ]
        for (request, status, code) in cases {
            let refused = try await send(
                PaymentCredentialExchange(credential: sealed, paymentMethod: nil, merchantToken: request))
            #expect(refused.status == status && InAppFixture.errorCode(refused) == code, "\(request)")
        }
        struct UnknownKind: Encodable {
            let credential: String
            let merchantToken = ["kind": "monthly", "tokenReference": "tok_phone_b"]
        }
        let unknownKind = try await send(UnknownKind(credential: sealed))
        #expect(unknownKind.status == .badRequest, "\(String(decoding: unknownKind.body, as: UTF8.self))")
        #expect(try await store.read { db in try db.query("SELECT 1 FROM merchant_tokens", []) { _ in 1 } }.isEmpty)
        // Nothing was consumed: the same credential, without a merchant token, pays.
        let paid = try await send(PaymentCredentialExchange(credential: sealed, paymentMethod: nil))
        #expect(paid.status == .ok, "\(String(decoding: paid.body, as: UTF8.self))")
        await store.close()
        await f.close()
    }
}
