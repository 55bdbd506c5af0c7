import Foundation
import MerchantKit
import OrchardCrypto
import OrchardX509
import PaymentToken

/// The demo's merchant-SDK section: an Apple-shaped token-signing PKI, a merchant with P-256 and RSA
/// processing certificates, tokens made in both formats, then verified and decrypted as a merchant would.
enum DemoMerchantSDK {
    struct Report: Encodable {
        let steps: [KnownAnswers.Result]
        let passed: Bool
    }

    static func run(trace: (String) -> Void) -> Report {
        var steps: [KnownAnswers.Result] = []
        func step(_ name: String, _ body: () throws -> String) {
            do {
                let detail = try body()
                steps.append(KnownAnswers.Result(name: name, passed: true, detail: detail))
                trace("ok   \(name): \(detail)")
            } catch {
                steps.append(KnownAnswers.Result(name: name, passed: false, detail: "\(error)"))
                trace("FAIL \(name): \(error)")
            }
        }
        let now = Date()
        var pki: TokenSigningPKI?
        var identities: [MerchantIdentity] = []
        var certificates: [Certificate] = []
        let merchantIdentifier = "merchant.dev.orchard.demo"
        step("token-signing PKI (root → integration CA 6.2.14 → signing leaf 6.29)") {
            let made = try TokenSigningPKI.generate(notValidBefore: now - 3600, notValidAfter: now + 86_400 * 365)
            pki = made
            return "leaf \(made.leaf.subject)"
        }
        step("merchant processing certificates (P-256 and RSA-2048, merchant-ID extension 6.32 and UID)") {
            guard let pki else { throw CLIError.failure("no PKI") }
            let ecKey = try P256.Signing.PrivateKey()
            let rsaKey = try RSA.PrivateKey(keySize: 2048)
            for key in [CertificatePrivateKey(ecKey), CertificatePrivateKey(rsaKey)] {
                let certificate = try Certificate.issue(
                    subject: DistinguishedName([
                        .userID(merchantIdentifier), .commonName("Merchant ID: \(merchantIdentifier)"),
                    ]),
                    publicKey: key.publicKey, issuer: .certificate(pki.intermediate, key: pki.intermediateKey),
                    notValidBefore: now - 3600, notValidAfter: now + 86_400 * 365,
                    extensions: [.appleMerchantIdentifier(merchantIdentifier)])
                certificates.append(certificate)
            }
            identities = [
                try MerchantIdentity(certificate: certificates[0], privateKeyPEM: try ecKey.pemRepresentation),
                try MerchantIdentity(certificate: certificates[1], privateKeyPEM: try rsaKey.pemRepresentation),
            ]
            return "publicKeyHash \(StrictEncoding.base64Encode(identities[0].publicKeyHash).prefix(12))…"
        }
        let payment = try? StrictJSONParser.parse(
            Array(
                """
                {"applicationPrimaryAccountNumber":"4895370012345671","applicationExpirationDate":"291231",\
                "currencyCode":"840","transactionAmount":1999,"deviceManufacturerIdentifier":"040010030273",\
                "paymentDataType":"3DSecure","paymentData":{"onlinePaymentCryptogram":"AgAAAAAABk4DWZ4C28yUQAAAAAA=",\
                "eciIndicator":"7"}}
                """.utf8), limits: .paymentToken)
        let orderData = Array("order-0001".utf8)
        for (index, format) in ["EC_v1", "RSA_v1"].enumerated() {
            step("\(format) token made, verified and decrypted with applicationData") {
                guard let pki, let payment, identities.count == 2 else { throw CLIError.failure("earlier step failed") }
                let paymentData = try PaymentTokenEncoder(signer: try pki.signer()).makePaymentData(
                    payment: payment,
                    recipient: try MerchantProcessingPublicKey(processingCertificate: certificates[index]),
                    applicationData: orderData)
                let token = try PaymentToken(jsonBytes: paymentData.json.serializedBytes)
                let decryptor = try PaymentTokenDecryptor(identities: identities, trustRoots: [pki.root])
                let result = try decryptor.decrypt(
                    token, order: ExpectedOrder(applicationData: orderData, amount: 1999, currencyCode: "840"))
                guard result.version.rawValue == format else { throw CLIError.failure("wrong version") }
                var tampered = token
                tampered.paymentData.data[0] ^= 0x01
                guard (try? decryptor.decrypt(tampered)) == nil else {
                    throw CLIError.failure("a tampered token was accepted")
                }
                return "\(result.payment) signed at \(result.signature.signingTime); a flipped bit is refused"
            }
        }
        return Report(steps: steps, passed: steps.allSatisfy(\.passed))
    }
}
