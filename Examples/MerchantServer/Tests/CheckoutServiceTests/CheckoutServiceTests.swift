import CheckoutService
import Foundation
import MerchantKit
import OrchardCrypto
import OrchardX509
import PaymentToken
import Testing

/// The files of `Fixtures/` (see its README for their source and licence).
enum Fixture {
    static func bytes(_ path: String) throws -> [UInt8] {
        let folder = try #require(Bundle.module.url(forResource: "Fixtures", withExtension: nil))
        return Array(try Data(contentsOf: folder.appendingPathComponent(path)))
    }

    static func text(_ path: String) throws -> String { String(decoding: try bytes(path), as: UTF8.self) }
}

/// A real token made by Apple's servers, with the merchant certificate and key that decrypt it.
struct AppleToken: Sendable, CustomTestStringConvertible {
    let folder: String
    let certificate: String
    let key: String
    /// The token's CMS signing time: Apple's signing certificates have expired since, so the service is
    /// evaluated a minute after it (as MerchantKit's own tests do), never at today's date.
    let signedAt: Date
    let dpan: String
    let cryptogram: String
    let eci: String?

    var testDescription: String { folder }

    func service(at date: Date? = nil) throws -> CheckoutService {
        try CheckoutService(
            certificatePEM: Fixture.text("\(folder)/\(certificate)"), privateKeyPEM: Fixture.text("\(folder)/\(key)"),
            clock: ManualClock(now: date ?? signedAt + 60))
    }

    func token() throws -> [UInt8] { try Fixture.bytes("\(folder)/token.json") }

    static let ecV1 = AppleToken(
        folder: "gala-2023", certificate: "certificate.pem", key: "private_key.pem",
        signedAt: Date(timeIntervalSince1970: 1_630_522_986),  // 2021-09-01 19:03:06 UTC
        dpan: "5353756319181169", cryptogram: "AMwBRjPWDnAgAA7Rls7mAoABFA==", eci: nil)
    static let rsaV1 = AppleToken(
        folder: "basis-rsa", certificate: "apple_pay.pem", key: "private.key",
        signedAt: Date(timeIntervalSince1970: 1_704_736_484),  // 2024-01-08 17:54:44 UTC
        dpan: "4784000000380075", cryptogram: "/w87QS0AExt/z6EPXrU2MAACAAA=", eci: "7")
    static let all = [ecV1, rsaV1]
}

/// Each real token pays 1.00 USD and carries no applicationData.
let appleOrder = Order(amount: 100, currencyCode: "840", applicationData: nil)

@Suite("Apple's own tokens")
struct AppleTokenCheckoutTests {
    @Test(arguments: AppleToken.all)
    func authorizesForTheProcessor(apple: AppleToken) throws {
        let authorization = try apple.service().authorize(tokenJSON: apple.token(), for: appleOrder)
        #expect(authorization.dpan == apple.dpan)
        #expect(authorization.cryptogram == apple.cryptogram)
        #expect(authorization.eci == apple.eci)
        #expect(authorization.amount == 100)
        #expect(authorization.currencyCode == "840")
        #expect(authorization.transactionId.count == 64)
        // Safe to log: the last four digits only, no cryptogram.
        let logged = "\(authorization)"
        #expect(logged.contains("…\(apple.dpan.suffix(4))"))
        #expect(!logged.contains(apple.dpan))
        #expect(!logged.contains(apple.cryptogram))
    }

    @Test(arguments: AppleToken.all)
    func refusesAWrongAmountOrCurrency(apple: AppleToken) throws {
        let service = try apple.service()
        let mismatch = CheckoutError.refused(MerchantKitError(.orderMismatch, ""))
        #expect(throws: mismatch) {
            try service.authorize(
                tokenJSON: apple.token(), for: Order(amount: 99, currencyCode: "840", applicationData: nil))
        }
        #expect(throws: mismatch) {
            try service.authorize(
                tokenJSON: apple.token(), for: Order(amount: 100, currencyCode: "978", applicationData: nil))
        }
        // An order that sent applicationData cannot be paid by a token made without it.
        #expect(throws: mismatch) {
            try service.authorize(
                tokenJSON: apple.token(), for: Order(amount: 100, currencyCode: "840", applicationData: [1, 2, 3]))
        }
        // A refusal spends nothing: the right order still goes through.
        #expect(try service.authorize(tokenJSON: apple.token(), for: appleOrder).dpan == apple.dpan)
    }

    @Test func refusesAStaleToken() throws {
        // Today the token is years old (and its signing chain has expired).
        let service = try AppleToken.ecV1.service(at: Date())
        #expect(throws: CheckoutError.refused(MerchantKitError(.signingTimeTooOld, ""))) {
            try service.authorize(tokenJSON: AppleToken.ecV1.token(), for: appleOrder)
        }
    }

    @Test func refusesATokenForAnotherMerchantKey() throws {
        let service = try AppleToken.rsaV1.service(at: AppleToken.ecV1.signedAt + 60)
        #expect(throws: CheckoutError.refused(MerchantKitError(.unknownPublicKeyHash, ""))) {
            try service.authorize(tokenJSON: AppleToken.ecV1.token(), for: appleOrder)
        }
    }

    @Test func refusesATamperedToken() throws {
        // One hex digit of the signed transactionId changed: the JSON is still well formed.
        var object = try #require(
            try JSONSerialization.jsonObject(with: Data(AppleToken.ecV1.token())) as? [String: Any])
        var header = try #require(object["header"] as? [String: String])
        let id = try #require(header["transactionId"])
        header["transactionId"] = String(id.dropLast()) + (id.hasSuffix("0") ? "1" : "0")
        object["header"] = header
        let tampered = Array(try JSONSerialization.data(withJSONObject: object))
        #expect(throws: CheckoutError.refused(MerchantKitError(.signatureInvalid, ""))) {
            try AppleToken.ecV1.service().authorize(tokenJSON: tampered, for: appleOrder)
        }
    }

    @Test func refusesMalformedJSONAndASecondUse() throws {
        let service = try AppleToken.ecV1.service()
        #expect(throws: CheckoutError.refused(MerchantKitError(.malformedToken, ""))) {
            try service.authorize(tokenJSON: Array("{\"paymentData\":".utf8), for: appleOrder)
        }
        _ = try service.authorize(tokenJSON: AppleToken.ecV1.token(), for: appleOrder)
        #expect(throws: CheckoutError.refused(MerchantKitError(.replayed, ""))) {
            try service.authorize(tokenJSON: AppleToken.ecV1.token(), for: appleOrder)
        }
    }

    @Test func refusesAKeyThatIsNotTheCertificates() throws {
        #expect(throws: MerchantKitError(.invalidConfiguration, "")) {
            try CheckoutService(
                certificatePEM: Fixture.text("gala-2023/certificate.pem"),
                privateKeyPEM: Fixture.text("basis-rsa/private.key"))
        }
    }
}

/// A token made as Orchard's Pay server makes it (`orchard token make` does the same): a signing PKI shaped
/// like Apple's, a processing certificate for the merchant, the payment data encrypted to it and signed.
struct OrchardPayServer {
    let now = Date()
    let pki: TokenSigningPKI
    let certificatePEM: String
    let keyPEM: String
    let processingCertificate: Certificate

    init() throws {
        pki = try TokenSigningPKI.generate(notValidBefore: now - 3600, notValidAfter: now + 86_400)
        let key = try P256.Signing.PrivateKey()
        processingCertificate = try Certificate.issue(
            subject: DistinguishedName([.commonName("Merchant ID: merchant.com.example.shop")]),
            publicKey: CertificatePrivateKey(key).publicKey,
            issuer: .certificate(pki.intermediate, key: pki.intermediateKey), notValidBefore: now - 3600,
            notValidAfter: now + 86_400, extensions: [.appleMerchantIdentifier("merchant.com.example.shop")])
        certificatePEM = processingCertificate.pemRepresentation
        keyPEM = try key.pemRepresentation
    }

    /// The merchant's service, trusting this Pay server's root instead of Apple's.
    func service() throws -> CheckoutService {
        try CheckoutService(certificatePEM: certificatePEM, privateKeyPEM: keyPEM, trustRoots: [pki.root])
    }

    func token(amount: Int64, applicationData: [UInt8]?) throws -> [UInt8] {
        let payment = try StrictJSONParser.parse(
            Array(
                """
                {"applicationPrimaryAccountNumber":"4895370012345671","applicationExpirationDate":"291231",\
                "currencyCode":"840","transactionAmount":\(amount),"deviceManufacturerIdentifier":"040010030273",\
                "paymentDataType":"3DSecure","paymentData":{"onlinePaymentCryptogram":"AgAAAAAABk4DWZ4C28yUQAAAAAA=",\
                "eciIndicator":"7"}}
                """.utf8), limits: .paymentToken)
        let paymentData = try PaymentTokenEncoder(signer: pki.signer()).makePaymentData(
            payment: payment, recipient: MerchantProcessingPublicKey(processingCertificate: processingCertificate),
            applicationData: applicationData)
        let token = PaymentToken(
            paymentData: paymentData,
            paymentMethod: PaymentMethod(displayName: "Visa 5671", network: "Visa", type: "credit"),
            transactionIdentifier: paymentData.header.transactionIdHex.uppercased())
        return token.json.serializedBytes
    }
}

@Suite("An Orchard-made token")
struct OrchardTokenCheckoutTests {
    let orderReference = Array("order-1042".utf8)

    @Test func authorizesTheOrderItWasMadeFor() throws {
        let pay = try OrchardPayServer()
        let order = Order(amount: 1999, currencyCode: "840", applicationData: orderReference)
        let authorization = try pay.service().authorize(
            tokenJSON: pay.token(amount: 1999, applicationData: orderReference), for: order)
        #expect(authorization.dpan == "4895370012345671")
        #expect(authorization.cryptogram == "AgAAAAAABk4DWZ4C28yUQAAAAAA=")
        #expect(authorization.eci == "7")
        #expect("\(authorization)" == "ProcessorAuthorization(…5671, 1999 840, ECI 7)")
    }

    @Test func refusesAnotherOrdersTokenOrAmount() throws {
        let pay = try OrchardPayServer()
        let service = try pay.service()
        let mismatch = CheckoutError.refused(MerchantKitError(.orderMismatch, ""))
        #expect(throws: mismatch) {
            try service.authorize(
                tokenJSON: pay.token(amount: 1999, applicationData: Array("order-1043".utf8)),
                for: Order(amount: 1999, currencyCode: "840", applicationData: orderReference))
        }
        #expect(throws: mismatch) {
            try service.authorize(
                tokenJSON: pay.token(amount: 1, applicationData: orderReference),
                for: Order(amount: 1999, currencyCode: "840", applicationData: orderReference))
        }
    }

    @Test func refusesItWhenOnlyApplesRootIsTrusted() throws {
        let pay = try OrchardPayServer()
        let production = try CheckoutService(certificatePEM: pay.certificatePEM, privateKeyPEM: pay.keyPEM)
        #expect(throws: CheckoutError.refused(MerchantKitError(.chainUntrusted, ""))) {
            try production.authorize(
                tokenJSON: pay.token(amount: 1999, applicationData: nil),
                for: Order(amount: 1999, currencyCode: "840", applicationData: nil))
        }
    }
}
