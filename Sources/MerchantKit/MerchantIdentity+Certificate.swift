import OrchardCrypto
public import OrchardX509

extension MerchantIdentity {
    /// An identity from the merchant's payment processing certificate and its private key (PEM: SEC1 or
    /// PKCS#8, possibly after an `EC PARAMETERS` block; RSA as PKCS#1 or PKCS#8).
    ///
    /// The merchant identifier hash comes from extension 1.2.840.113635.100.6.32, or else from SHA-256 of
    /// the subject UID; `publicKeyHash` is SHA-256 of the certificate's SubjectPublicKeyInfo. The key must
    /// be the certificate's key: a processing certificate paired with the identity (TLS) key is the most
    /// common setup mistake, and is refused here rather than failing later as a GCM error.
    public init(certificatePEM: String, privateKeyPEM: String) throws(MerchantKitError) {
        let certificate: Certificate
        do {
            certificate = try Certificate(pemEncoded: certificatePEM)
        } catch {
            throw MerchantKitError(
                .invalidConfiguration, "the processing certificate is not a PEM certificate", underlying: error)
        }
        try self.init(certificate: certificate, privateKeyPEM: privateKeyPEM)
    }

    /// An identity from a parsed processing certificate and its PEM private key; throws `invalidConfiguration` when the
    /// certificate names no merchant identifier (extension or subject UID), the PEM holds no P-256 or RSA key, or the
    /// key is not the certificate's.
    public init(certificate: Certificate, privateKeyPEM: String) throws(MerchantKitError) {
        let merchantHash: [UInt8]
        do {
            if let hash = try certificate.appleMerchantIdentifierHash {
                merchantHash = hash
            } else if let uid = certificate.subject.userID {
                merchantHash = SHA256.hash(Array(uid.utf8))
            } else {
                throw MerchantKitError(
                    .invalidConfiguration,
                    "the certificate has neither the merchant identifier extension nor a subject UID: is it a payment processing certificate?"
                )
            }
        } catch let error as MerchantKitError {
            throw error
        } catch {
            throw MerchantKitError(
                .invalidConfiguration, "the merchant identifier extension is malformed", underlying: error)
        }
        let spki = certificate.subjectPublicKeyInfo.derRepresentation
        let key: ProcessingKey
        if let ec = try? P256.KeyAgreement.PrivateKey(pemRepresentation: privateKeyPEM) {
            key = .ec(ec)
            guard ec.publicKey.derRepresentation == spki else {
                throw MerchantKitError(
                    .invalidConfiguration,
                    "the private key does not belong to the processing certificate (is it the merchant identity key?)")
            }
        } else if let rsa = try? RSA.PrivateKey(pemRepresentation: privateKeyPEM) {
            key = .rsa(rsa)
            guard rsa.publicKey.derRepresentation == spki else {
                throw MerchantKitError(
                    .invalidConfiguration,
                    "the private key does not belong to the processing certificate (is it the merchant identity key?)")
            }
        } else {
            throw MerchantKitError(
                .invalidConfiguration, "the private key PEM holds no P-256 or RSA (2048 bits or more) private key")
        }
        self.init(unchecked: key, publicKeyHash: SHA256.hash(spki), merchantIdentifierHash: merchantHash)
    }
}
