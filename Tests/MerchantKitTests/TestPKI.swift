import Foundation
import OrchardCrypto
import OrchardX509
import PaymentToken

@testable import MerchantKit

/// An Apple-shaped PKI made in the test: root → integration CA (6.2.14) → signing leaf (6.29), and a
/// merchant with P-256 and RSA processing certificates (6.32 and UID).
struct TestPKI {
    static let start = Date(timeIntervalSince1970: 1_767_225_600)  // 2026-01-01
    static let end = Date(timeIntervalSince1970: 1_893_456_000)  // 2030-01-01
    static let now = Date(timeIntervalSince1970: 1_780_000_000)  // 2026-05-28

    let root: Certificate
    let intermediate: Certificate
    let leaf: Certificate
    let leafKey: CertificatePrivateKey
    let merchantIdentifier = "merchant.dev.orchard.test"
    let ecCertificate: Certificate
    let ecKey: P256.KeyAgreement.PrivateKey
    let rsaCertificate: Certificate
    let rsaKey: RSA.PrivateKey

    /// Builds the PKI; `leafMarker` and `intermediateMarker` can be left out to test their absence.
    init(leafMarker: Bool = true, intermediateMarker: Bool = true) throws {
        let rootKey = CertificatePrivateKey(try P256.Signing.PrivateKey())
        root = try Certificate.issue(
            subject: DistinguishedName([.commonName("Test Root CA")]), publicKey: rootKey.publicKey,
            issuer: .selfSigned(rootKey), notValidBefore: Self.start, notValidAfter: Self.end,
            extensions: [.basicConstraints(isCA: true), .keyUsage([.keyCertSign, .cRLSign])])
        let intermediateKey = CertificatePrivateKey(try P256.Signing.PrivateKey())
        intermediate = try Certificate.issue(
            subject: DistinguishedName([.commonName("Test Application Integration CA")]),
            publicKey: intermediateKey.publicKey, issuer: .certificate(root, key: rootKey), notValidBefore: Self.start,
            notValidAfter: Self.end,
            extensions: [.basicConstraints(isCA: true, pathLength: 0), .keyUsage([.keyCertSign, .cRLSign])]
                + (intermediateMarker ? [.appleApplicationIntegrationCAMarker] : []))
        leafKey = CertificatePrivateKey(try P256.Signing.PrivateKey())
        leaf = try Certificate.issue(
            subject: DistinguishedName([.commonName("test-smp-broker-sign")]), publicKey: leafKey.publicKey,
            issuer: .certificate(intermediate, key: intermediateKey), notValidBefore: Self.start,
            notValidAfter: Self.end,
            extensions: [.basicConstraints(isCA: false), .keyUsage([.digitalSignature])]
                + (leafMarker ? [.appleTokenSigningLeafMarker] : []))
        ecKey = try P256.KeyAgreement.PrivateKey()
        let merchantCAKey = CertificatePrivateKey(try P256.Signing.PrivateKey())
        let merchantCA = try Certificate.issue(
            subject: DistinguishedName([.commonName("Test Merchant CA")]), publicKey: merchantCAKey.publicKey,
            issuer: .selfSigned(merchantCAKey), notValidBefore: Self.start, notValidAfter: Self.end,
            extensions: [.basicConstraints(isCA: true)])
        ecCertificate = try Certificate.issue(
            subject: DistinguishedName([.userID(merchantIdentifier), .commonName("Merchant ID: \(merchantIdentifier)")]
            ),
            publicKey: CertificatePublicKey(
                try P256.Signing.PublicKey(x963Representation: ecKey.publicKey.x963Representation)),
            issuer: .certificate(merchantCA, key: merchantCAKey), notValidBefore: Self.start, notValidAfter: Self.end,
            extensions: [.appleMerchantIdentifier(merchantIdentifier)])
        rsaKey = try RSA.PrivateKey(keySize: 2048)
        rsaCertificate = try Certificate.issue(
            subject: DistinguishedName([.userID(merchantIdentifier)]),
            publicKey: CertificatePublicKey(rsaKey.publicKey),
            issuer: .certificate(merchantCA, key: merchantCAKey), notValidBefore: Self.start, notValidAfter: Self.end,
            extensions: [.appleMerchantIdentifier(merchantIdentifier)])
    }

    func signer(at date: Date = TestPKI.now) throws -> CMSTokenSigner {
        try CMSTokenSigner(leaf: leaf, key: leafKey, intermediate: intermediate, clock: ManualClock(now: date))
    }

    func ecIdentity() throws -> MerchantIdentity {
        try MerchantIdentity(certificate: ecCertificate, privateKeyPEM: try ecKey.pemRepresentation)
    }

    func rsaIdentity() throws -> MerchantIdentity {
        try MerchantIdentity(certificate: rsaCertificate, privateKeyPEM: try rsaKey.pemRepresentation)
    }

    func decryptor(
        at date: Date = TestPKI.now, identities: [MerchantIdentity]? = nil,
        replayGuard: (any TransactionReplayGuard)? = nil
    ) throws -> PaymentTokenDecryptor {
        try PaymentTokenDecryptor(
            identities: identities ?? [try ecIdentity(), try rsaIdentity()], trustRoots: [root],
            clock: ManualClock(now: date), replayGuard: replayGuard)
    }

    static let samplePayment: JSONValue = try! StrictJSONParser.parse(
        Array(
            """
            {"applicationPrimaryAccountNumber":"4895370012345671","applicationExpirationDate":"291231",\
            "currencyCode":"840","transactionAmount":1999,"deviceManufacturerIdentifier":"040010030273",\
            "paymentDataType":"3DSecure","paymentData":{"onlinePaymentCryptogram":"AgAAAAAABk4DWZ4C28yUQAAAAAA=",\
            "eciIndicator":"7"}}
            """.utf8), limits: .paymentToken)

    func token(
        for certificate: Certificate? = nil, payment: JSONValue = TestPKI.samplePayment,
        applicationData: [UInt8]? = nil,
        signedAt: Date = TestPKI.now
    ) throws -> PaymentToken {
        let recipient = try MerchantProcessingPublicKey(processingCertificate: certificate ?? ecCertificate)
        let paymentData = try PaymentTokenEncoder(signer: try signer(at: signedAt)).makePaymentData(
            payment: payment, recipient: recipient, applicationData: applicationData)
        return PaymentToken(
            paymentData: paymentData,
            paymentMethod: PaymentMethod(displayName: "Visa 5671", network: "Visa", type: "credit"),
            transactionIdentifier: paymentData.header.transactionIdHex.uppercased())
    }
}
