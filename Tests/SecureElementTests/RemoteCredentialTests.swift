import EMV
import Foundation
import OrchardCrypto
import PaymentCredential
import SecureElement
import Testing

@Suite("Secure Element: in-app and web payment credentials")
struct RemoteCredentialTests {
    static let remoteMasterKey = SymmetricKey(data: [UInt8](repeating: 0x5A, count: 16))
    let payServer: P256.KeyAgreement.PrivateKey
    init() throws { payServer = try P256.KeyAgreement.PrivateKey() }

    static let session = "SSH" + String(repeating: "A", count: 32) + "_" + String(repeating: "B", count: 64)

    func request(
        _ amount: PaymentAmount, hash: [UInt8]? = SHA256.hash(Array("order".utf8)), session: String? = nil
    ) throws
        -> RemotePaymentRequest
    {
        try RemotePaymentRequest(
            merchantIdentifier: "merchant.dev.orchard.demo",
            applicationIdentifier: session == nil ? "dev.orchard.demo-app" : "store.orchard.test",
            amount: amount, applicationDataHash: hash, merchantSessionIdentifier: session,
            merchantSessionNonce: session.map { _ in "0a1b2c3d" })
    }

    @Test("After an in-app authorization: signed, sealed, bound to nonce, amount and merchant; ATC stored first")
    func credential() async throws {
        let h = try await Harness()
        let card = try await h.provision(dpan: visaDPAN)
        let amount = try PaymentAmount(minorUnits: 1999, currency: 840)
        let nonce = h.random.bytes(32)
        let sealed = try await h.element.remotePaymentCredential(
            authorization: try await h.authorization(card.card, type: .inApp, amount: amount), card: card.card,
            request: try request(amount), nonce: nonce, payServerKey: payServer.publicKey)
        #expect(try await h.element.lastATC(card.card) == 1)
        let opened = try SealedPaymentCredential.open(sealed, with: payServer)
        #expect(opened.isSigned(by: try h.element.credentialSigningKey))
        let credential = opened.credential
        #expect(credential.nonce == nonce && credential.dpanString == visaDPAN && credential.expiry == "301231")
        #expect(credential.amount == 1999 && credential.currency == 840 && credential.channel == .inApp)
        #expect(credential.eci == "05" && credential.applicationDataHash == SHA256.hash(Array("order".utf8)))
        #expect(credential.cryptogram.atc == 1 && credential.cryptogram.isBound(toNonce: nonce))
        #expect(
            try credential.cryptogram.verify(
                masterKey: Self.remoteMasterKey, amount: 1999, currency: 840,
                merchantIdentifierHash: SHA256.hash(Array("merchant.dev.orchard.demo".utf8))))
        // Contactless uses the same counter afterwards.
        try await h.element.authorizeContactless(try await h.authorization(card.card))
        let outcome = try await h.tap(amount: 100)
        #expect(outcome.card?.atc == 2)
        // A web authorization gives a web credential (version 2, bound to the merchant session), with the next ATC.
        let web = try await h.element.remotePaymentCredential(
            authorization: try await h.authorization(card.card, type: .web, amount: amount), card: card.card,
            request: try request(amount, hash: nil, session: Self.session), nonce: nonce,
            payServerKey: payServer.publicKey)
        let webCredential = try SealedPaymentCredential.open(web, with: payServer).credential
        #expect(webCredential.channel == .web && webCredential.cryptogram.atc == 3)
        #expect(webCredential.applicationDataHash == nil)
        #expect(webCredential.merchantSession?.identifier == Self.session)
        #expect(webCredential.merchantSession?.nonce == "0a1b2c3d")
        #expect(webCredential.encoded().unsafeCopyOfBytes().prefix(4) == [0x00, 0x00, 0x01, 0x02])
        // A web authorization without a session, or an in-app one with a session: refused, no ATC used.
        await expectCode(.invalidArgument) {
            try await h.element.remotePaymentCredential(
                authorization: try await h.authorization(card.card, type: .web, amount: amount), card: card.card,
                request: try request(amount, hash: nil), nonce: nonce, payServerKey: payServer.publicKey)
        }
        await expectCode(.invalidArgument) {
            try await h.element.remotePaymentCredential(
                authorization: try await h.authorization(card.card, type: .inApp, amount: amount), card: card.card,
                request: try request(amount, session: Self.session), nonce: nonce, payServerKey: payServer.publicKey)
        }
        #expect(try await h.element.lastATC(card.card) == 3)
    }

    @Test("The ECI is the network's fully authenticated value: Visa 05 and Mastercard 02, in app and on the web")
    func electronicCommerceIndicators() async throws {
        for (dpan, network, eci) in [(visaDPAN, "visa", "05"), (mastercardDPAN, "masterCard", "02")] {
            let h = try await Harness()
            let card = try await h.provision(dpan: dpan, network: network)
            let amount = try PaymentAmount(minorUnits: 1999, currency: 840)
            let nonce = h.random.bytes(32)
            let inApp = try await h.element.remotePaymentCredential(
                authorization: try await h.authorization(card.card, type: .inApp, amount: amount), card: card.card,
                request: try request(amount), nonce: nonce, payServerKey: payServer.publicKey)
            let web = try await h.element.remotePaymentCredential(
                authorization: try await h.authorization(card.card, type: .web, amount: amount), card: card.card,
                request: try request(amount, hash: nil, session: Self.session), nonce: nonce,
                payServerKey: payServer.publicKey)
            #expect(try SealedPaymentCredential.open(inApp, with: payServer).credential.eci == eci, "\(network)")
            #expect(try SealedPaymentCredential.open(web, with: payServer).credential.eci == eci, "\(network)")
        }
    }

    @Test("Refused: contactless authorization, reused authorization, other amount, bad nonce; no ATC used")
    func refusals() async throws {
        let h = try await Harness()
        let card = try await h.provision(dpan: visaDPAN)
        let amount = try PaymentAmount(minorUnits: 1999, currency: 840)
        let nonce = h.random.bytes(32)
        await expectCode(.wrongTransactionType) {
            try await h.element.remotePaymentCredential(
                authorization: try await h.authorization(card.card, type: .contactless, amount: amount),
                card: card.card, request: try request(amount), nonce: nonce, payServerKey: payServer.publicKey)
        }
        let other = try PaymentAmount(minorUnits: 2999, currency: 840)
        await expectCode(.wrongCard) {
            try await h.element.remotePaymentCredential(
                authorization: try await h.authorization(card.card, type: .inApp, amount: amount),
                card: card.card, request: try request(other), nonce: nonce, payServerKey: payServer.publicKey)
        }
        await expectCode(.invalidArgument) {
            try await h.element.remotePaymentCredential(
                authorization: try await h.authorization(card.card, type: .inApp, amount: amount),
                card: card.card, request: try request(amount), nonce: [1, 2, 3], payServerKey: payServer.publicKey)
        }
        let authorization = try await h.authorization(card.card, type: .inApp, amount: amount)
        _ = try await h.element.remotePaymentCredential(
            authorization: authorization, card: card.card, request: try request(amount), nonce: nonce,
            payServerKey: payServer.publicKey)
        await expectCode(.authorizationReplayed) {
            try await h.element.remotePaymentCredential(
                authorization: authorization, card: card.card, request: try request(amount), nonce: nonce,
                payServerKey: payServer.publicKey)
        }
        #expect(try await h.element.lastATC(card.card) == 1)
    }
}
