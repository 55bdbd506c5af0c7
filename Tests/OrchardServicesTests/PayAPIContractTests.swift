import Foundation
import PayAPI
import SecureElement
import Testing

/// The device ↔ Pay server wire format, pinned: devices in the field and the Pay server must keep reading each
/// other, so every body's JSON is fixed here key for key (both sides import these types; the end-to-end
/// provisioning, in-app and analytics tests bind them over HTTPS).
@Suite("Device ↔ Pay server wire format (PayAPI) is pinned")
struct PayAPIContractTests {
    func json(_ value: some Encodable) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }

    func roundTrips<T: Codable & Equatable>(_ value: T, as expected: String) throws {
        #expect(try json(value) == expected)
        #expect(try JSONDecoder().decode(T.self, from: Data(expected.utf8)) == value)
    }

    @Test func routes() {
        #expect(PayAPI.Route.register == "/v1/devices/register")
        #expect(PayAPI.Route.provisioningKey == "/v1/provisioning/key")
        #expect(PayAPI.Route.checkCard == "/v1/provisioning/check-card")
        #expect(PayAPI.Route.oneTimeCode == "/v1/provisioning/one-time-code")
        #expect(PayAPI.Route.terms == "/v1/provisioning/terms/")
        #expect(PayAPI.Route.link == "/v1/provisioning/link")
        #expect(PayAPI.Route.cards == "/v1/devices/self/cards")
        #expect(PayAPI.Route.notifications == "/v1/devices/self/notifications")
        #expect(PayAPI.Route.appEntitlements("dev.app") == "/v1/apps/dev.app/merchants")
        #expect(PayAPI.Route.credentialCertificate == "/v1/payments/credential-certificate")
        #expect(PayAPI.Route.paymentNonce == "/v1/payments/nonce")
        #expect(PayAPI.Route.paymentCredential == "/v1/payments/credential")
        #expect(PayAPI.Route.anonymousPurchases == "/v1/analytics/purchases")
        #expect(
            PayAPI.cardDataPurpose(deviceID: "d1", recipient: "token-service") == "wallet/d1>token-service:card-data")
    }

    @Test func provisioningBodies() throws {
        let card = CardDisplay(network: "visa", type: "credit", suffix: "1111", description: "Visa •••• 1111")
        try roundTrips(
            DeviceRegistrationRequest(secureElementCertificate: "QUJD", enclavePublicKey: "BA=="),
            as: #"{"enclavePublicKey":"BA==","secureElementCertificate":"QUJD"}"#)
        try roundTrips(
            ResumeChallenge(challenge: "AAE=", expiresInSeconds: 120),
            as: #"{"challenge":"AAE=","expiresInSeconds":120}"#)
        try roundTrips(
            ResumeRequest(challenge: "AAE=", attestation: "MEQ="), as: #"{"attestation":"MEQ=","challenge":"AAE="}"#)
        // Both sides sign and check the same bytes: the Secure Enclave's context is the contract's.
        #expect(PayAPI.PasscodeAttestation.context == SecureEnclave.passcodeAttestationContext)
        try roundTrips(
            RegisteredDevice(deviceID: "d1", account: "demo", kind: "phone", lostMode: false),
            as: #"{"account":"demo","deviceID":"d1","kind":"phone","lostMode":false}"#)
        try roundTrips(ProvisioningKeyResponse(certificate: "QUJD"), as: #"{"certificate":"QUJD"}"#)
        try roundTrips(
            CheckCardBody(idempotencyKey: "k1", encryptedCardData: "QUJD"),
            as: #"{"encryptedCardData":"QUJD","idempotencyKey":"k1"}"#)
        try roundTrips(OneTimeCodeBody(sessionID: "s1", code: "123456"), as: #"{"code":"123456","sessionID":"s1"}"#)
        try roundTrips(
            card, as: #"{"description":"Visa •••• 1111","network":"visa","suffix":"1111","type":"credit"}"#)
        try roundTrips(
            CardCheckResult(
                outcome: .stepUp, sessionID: "s1", termsID: "t1", stepUpMethod: "sms", stepUpDestination: "•••• 12",
                card: card),
            as: #"{"card":{"description":"Visa •••• 1111","network":"visa","suffix":"1111","type":"credit"},"#
                + #""outcome":"stepUp","sessionID":"s1","stepUpDestination":"•••• 12","stepUpMethod":"sms","termsID":"t1"}"#
        )
        try roundTrips(
            CardCheckResult(outcome: .declined, sessionID: nil, termsID: nil, declineReason: "unknownCard", card: nil),
            as: #"{"declineReason":"unknownCard","outcome":"declined"}"#)
        try roundTrips(TermsResponse(termsID: "t1", text: "Terms"), as: #"{"termsID":"t1","text":"Terms"}"#)
        try roundTrips(
            LinkBody(idempotencyKey: "k2", sessionID: "s1", termsAccepted: true),
            as: #"{"idempotencyKey":"k2","sessionID":"s1","termsAccepted":true}"#)
        try roundTrips(
            DeviceCard(tokenReference: "tok_1", card: card, state: "active"),
            as: #"{"card":{"description":"Visa •••• 1111","network":"visa","suffix":"1111","type":"credit"},"#
                + #""state":"active","tokenReference":"tok_1"}"#)
        try roundTrips(
            TokenNotification(sequence: 7, tokenReference: "tok_1", event: "suspended", state: "suspended"),
            as: #"{"event":"suspended","sequence":7,"state":"suspended","tokenReference":"tok_1"}"#)
        try roundTrips(
            NotificationsResponse(notifications: []), as: #"{"notifications":[]}"#)
        // The device's own state rides with its notifications; a Pay server without the field leaves it unsaid.
        try roundTrips(
            NotificationsResponse(notifications: [], lostMode: true), as: #"{"lostMode":true,"notifications":[]}"#)
        try roundTrips(
            NotificationsResponse(notifications: [], lostMode: false), as: #"{"lostMode":false,"notifications":[]}"#)
        #expect(
            try JSONDecoder().decode(NotificationsResponse.self, from: Data(#"{"notifications":[]}"#.utf8)).lostMode
                == nil)
        try roundTrips(
            LifecycleResult(deviceID: "d1", action: .lostMode, cards: []),
            as: #"{"action":"lost-mode","cards":[],"deviceID":"d1"}"#)
        try roundTrips(
            AppEntitlements(applicationIdentifier: "dev.app", merchantIdentifiers: ["merchant.a"]),
            as: #"{"applicationIdentifier":"dev.app","merchantIdentifiers":["merchant.a"]}"#)
    }

    @Test func paymentBodies() throws {
        try roundTrips(CredentialCertificateResponse(certificate: "QUJD"), as: #"{"certificate":"QUJD"}"#)
        try roundTrips(
            PaymentNonceResponse(nonce: "bm9uY2U=", expiresInSeconds: 60),
            as: #"{"expiresInSeconds":60,"nonce":"bm9uY2U="}"#)
        try roundTrips(
            PaymentCredentialExchange(
                credential: "QUJD",
                paymentMethod: PaymentMethodDisplay(displayName: "Visa 1111", network: "visa", type: "debit")),
            as: #"{"credential":"QUJD","paymentMethod":{"displayName":"Visa 1111","network":"visa","type":"debit"}}"#)
        // A recurring, automatic reload or deferred payment names the card's token (never its DPAN).
        try roundTrips(
            PaymentCredentialExchange(
                credential: "QUJD", paymentMethod: nil,
                merchantToken: MerchantTokenRequest(kind: .automaticReload, tokenReference: "tok_1")),
            as: #"{"credential":"QUJD","merchantToken":{"kind":"automaticReload","tokenReference":"tok_1"}}"#)
        #expect(MerchantTokenRequest.Kind.allCases.map(\.rawValue) == ["recurring", "automaticReload", "deferred"])
        try roundTrips(
            AnonymousPurchase(amountBucket: "10-25", hour: "2026-03-01T12", region: "840"),
            as: #"{"amountBucket":"10-25","hour":"2026-03-01T12","region":"840"}"#)
        try roundTrips(AnonymousPurchaseAccepted(accepted: true), as: #"{"accepted":true}"#)
    }

    @Test func theOneTimeCodeIsNeverPrinted() {
        let body = OneTimeCodeBody(sessionID: "s1", code: "123456")
        var dumped = ""
        dump(body, to: &dumped)
        for text in ["\(body)", String(reflecting: body), dumped] { #expect(!text.contains("123456")) }
    }

    @Test func bodiesMissingAFieldOrOfTheWrongTypeAreRefused() {
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode(CheckCardBody.self, from: Data(#"{"idempotencyKey":"k1"}"#.utf8))
        }
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode(
                LinkBody.self, from: Data(#"{"idempotencyKey":"k","sessionID":"s","termsAccepted":"yes"}"#.utf8))
        }
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode(CardCheckResult.self, from: Data(#"{"outcome":"maybe"}"#.utf8))
        }
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode(
                LifecycleResult.self, from: Data(#"{"action":"explode","cards":[],"deviceID":"d"}"#.utf8))
        }
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode(
                NotificationsResponse.self, from: Data(#"{"lostMode":"yes","notifications":[]}"#.utf8))
        }
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode(
                MerchantTokenRequest.self, from: Data(#"{"kind":"multiToken","tokenReference":"tok_1"}"#.utf8))
        }
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode(MerchantTokenRequest.self, from: Data(#"{"kind":"recurring"}"#.utf8))
        }
    }
}
