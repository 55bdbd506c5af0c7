public import Foundation
public import OrchardCrypto
public import OrchardX509
import PayAPI

extension PayClientError.Code {
    /// The credential certificate does not chain to the Orchard root or is not the Pay server's.
    public static let untrustedCredentialKey = PayClientError.Code("untrustedCredentialKey")
}

/// The Pay server's device-to-server credential key, accepted only from a certificate the Orchard root issued
/// directly with the profile of ``PayAPI/CredentialCertificate`` (O=Orchard, CN=Orchard Pay credential, key
/// usage keyAgreement), valid now. A Secure Element seals payment credentials to this key (docs/in-app.md).
public struct PayCredentialKey: Sendable {
    public let publicKey: P256.KeyAgreement.PublicKey

    /// Checks `certificate` against `root` at `now`.
    public init(certificate: Certificate, root: Certificate, now: Date) throws(PayClientError) {
        let verifier: CertificateChainVerifier
        do {
            verifier = try CertificateChainVerifier(trustRoots: [root], cacheCapacity: 0)
        } catch {
            throw PayClientError(.untrustedCredentialKey, "the Orchard root cannot be used: \(error)")
        }
        guard case .valid(let chain) = verifier.verify(leaf: certificate, at: now), chain.certificates.count == 2
        else {
            throw PayClientError(
                .untrustedCredentialKey, "the credential certificate was not issued by the Orchard root")
        }
        guard certificate.subject.organization == "Orchard",
            certificate.subject.commonName == PayAPI.CredentialCertificate.commonName,
            (try? certificate.keyUsage)?.contains(.keyAgreement) == true
        else {
            throw PayClientError(
                .untrustedCredentialKey, "the certificate is not the Pay server's credential certificate")
        }
        do {
            publicKey = try P256.KeyAgreement.PublicKey(
                derRepresentation: certificate.subjectPublicKeyInfo.derRepresentation)
        } catch {
            throw PayClientError(.untrustedCredentialKey, "the credential certificate holds no P-256 key")
        }
    }
}
