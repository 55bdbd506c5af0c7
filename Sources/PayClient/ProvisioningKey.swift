public import Foundation
public import OrchardCrypto
public import OrchardX509
import PayAPI

/// The token service's provisioning key, accepted only from a certificate the Orchard root issued directly
/// for that purpose (``PayAPI/ProvisioningCertificate``), valid now. The Pay server relays the certificate; a
/// key it made up itself would not chain to the root, so it can never read the card data sealed to this key.
public struct ProvisioningKey: Sendable {
    /// The key card data is sealed to.
    public let publicKey: P256.KeyAgreement.PublicKey
    /// The token service's name (the certificate's common name), which the envelope purpose names.
    public let recipient: String

    /// Checks `certificate` against `root` at `now`.
    public init(certificate: Certificate, root: Certificate, now: Date) throws(PayClientError) {
        let verifier: CertificateChainVerifier
        do {
            verifier = try CertificateChainVerifier(trustRoots: [root], cacheCapacity: 0)
        } catch {
            throw PayClientError(.untrustedProvisioningKey, "the Orchard root cannot be used: \(error)")
        }
        guard case .valid(let chain) = verifier.verify(leaf: certificate, at: now), chain.certificates.count == 2
        else {
            throw PayClientError(
                .untrustedProvisioningKey, "the provisioning certificate was not issued by the Orchard root")
        }
        guard certificate.subject.organizationalUnit == PayAPI.ProvisioningCertificate.organizationalUnit,
            let recipient = certificate.subject.commonName, !recipient.isEmpty
        else {
            throw PayClientError(
                .untrustedProvisioningKey, "the certificate is not a token service provisioning certificate")
        }
        do {
            publicKey = try P256.KeyAgreement.PublicKey(
                derRepresentation: certificate.subjectPublicKeyInfo.derRepresentation)
        } catch {
            throw PayClientError(.untrustedProvisioningKey, "the provisioning certificate holds no P-256 key")
        }
        self.recipient = recipient
    }

    /// Seals `card` for the wallet of `deviceID`: `SealedEnvelope` (ephemeral P-256 ECDH, HKDF-SHA256,
    /// AES-256-GCM) with purpose ``PayAPI/cardDataPurpose(deviceID:recipient:)``.
    public func seal(_ card: CardEntry, deviceID: String) throws(PayClientError) -> [UInt8] {
        let plaintext = try card.encoded()
        do {
            return try plaintext.withUnsafeBytes { (bytes) throws(CryptoError) in
                try SealedEnvelope.seal(
                    bytes, to: publicKey, purpose: PayAPI.cardDataPurpose(deviceID: deviceID, recipient: recipient))
            }
        } catch {
            throw PayClientError(.deviceFailure, "cannot seal the card data: \(error.code)")
        }
    }
}
