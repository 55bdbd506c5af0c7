import Foundation
public import OrchardCrypto
public import OrchardX509

/// Signs tokens as Apple does: detached CMS SignedData, BER with indefinite lengths, SHA-256 with the
/// leaf's key, signingTime from the injected clock, and the leaf and intermediate embedded (not the root).
public struct CMSTokenSigner: TokenSigner {
    /// The signing leaf, embedded in every signature.
    public let leaf: Certificate
    /// The intermediate CA, embedded after the leaf.
    public let intermediate: Certificate
    private let key: CertificatePrivateKey
    private let clock: any WallClock

    /// - Throws: ``PaymentTokenError/Code/encodingFailed`` when `key` is not the leaf's key.
    public init(
        leaf: Certificate, key: CertificatePrivateKey, intermediate: Certificate, clock: any WallClock = SystemClock()
    )
        throws(PaymentTokenError)
    {
        guard key.publicKey.derRepresentation == leaf.subjectPublicKeyInfo.derRepresentation else {
            throw PaymentTokenError(.encodingFailed, "the signing key is not the key of the signing certificate")
        }
        self.leaf = leaf
        self.intermediate = intermediate
        self.key = key
        self.clock = clock
    }

    public func detachedSignature(over signedBytes: [UInt8]) throws -> [UInt8] {
        try CMS.signDetached(
            signedBytes, signer: leaf, key: key, certificates: [leaf, intermediate], signingTime: clock.now(),
            encoding: .berIndefiniteLength, includeAlgorithmProtection: true)
    }
}

extension MerchantProcessingPublicKey {
    /// The key a merchant's payment processing certificate carries, with the merchant identifier hash from
    /// extension 1.2.840.113635.100.6.32 (or SHA-256 of the subject UID).
    public init(processingCertificate certificate: Certificate) throws(PaymentTokenError) {
        do {
            let publicKey = try certificate.publicKey
            if let rsa = publicKey.rsa {
                self = .rsa(rsa)
                return
            }
            guard let p256 = publicKey.p256 else {
                throw PaymentTokenError(.encodingFailed, "the processing certificate's key is neither P-256 nor RSA")
            }
            let hash: [UInt8]
            if let fromExtension = try certificate.appleMerchantIdentifierHash {
                hash = fromExtension
            } else if let uid = certificate.subject.userID {
                hash = SHA256.hash(Array(uid.utf8))
            } else {
                throw PaymentTokenError(
                    .encodingFailed,
                    "the processing certificate has neither the merchant identifier extension nor a UID")
            }
            self = .ec(
                try P256.KeyAgreement.PublicKey(x963Representation: p256.x963Representation),
                merchantIdentifierHash: hash)
        } catch let error as PaymentTokenError {
            throw error
        } catch {
            throw PaymentTokenError(.encodingFailed, "the processing certificate is unusable: \(error)")
        }
    }
}
