import Foundation
import OrchardCrypto
import OrchardX509
import PaymentToken

/// Caches of what the exchange checks again and again: the Secure Element certificates of registered devices
/// (issuer signature verified once per certificate; validity and subject checked at every use) and the
/// merchants' processing certificates (parsed once; which one is used is still decided from pay.sqlite at every
/// exchange, so a revocation takes effect at once). Keyed by the certificate's DER bytes; bounded.
final class VerifiedKeyCache: Sendable {
    struct SecureElementEntry: Sendable {
        let certificate: Certificate
        let key: P256.Signing.PublicKey
    }

    static let capacity = 4096
    private let secureElements = DERMemo<SecureElementEntry>(capacity: capacity)
    private let processing = DERMemo<(Certificate, MerchantProcessingPublicKey)>(capacity: capacity)
    private let deviceCA: Certificate
    private let deviceCAKey: CertificatePublicKey?

    init(deviceCA: Certificate) {
        self.deviceCA = deviceCA
        // try?: a device CA whose key cannot be read verifies no certificate: every check fails closed.
        deviceCAKey = try? deviceCA.publicKey
    }

    /// The certificate and P-256 key of `der` if the device CA issued it (signature checked on first use).
    func secureElement(_ der: [UInt8]) -> SecureElementEntry? {
        secureElements.value(for: der) {
            // try?: a certificate that does not parse is not verified.
            guard let deviceCAKey, let certificate = try? Certificate(derEncoded: der),
                certificate.issuer == deviceCA.subject, certificate.isSignature(validUnder: deviceCAKey),
                // try?: a key that cannot be read is not verified.
                let key = (try? certificate.publicKey)?.p256
            else { return nil }
            return SecureElementEntry(certificate: certificate, key: key)
        }
    }

    /// A processing certificate and the key a token is encrypted to, parsed once per certificate.
    func processingCertificate(_ der: [UInt8]) throws -> (Certificate, MerchantProcessingPublicKey) {
        try processing.value(
            for: der,
            always: {
                let certificate = try Certificate(derEncoded: der)
                return (certificate, try MerchantProcessingPublicKey(processingCertificate: certificate))
            })
    }
}
