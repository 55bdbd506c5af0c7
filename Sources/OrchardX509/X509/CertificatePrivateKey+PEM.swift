import OrchardCrypto

extension CertificatePrivateKey {
    /// The key as PKCS#8 PEM (`PRIVATE KEY`), held in `SecureBytes`, for writing to a 0600 file (`orchard init`
    /// persists keys made by helpers such as `TokenSigningPKI.generate` that return only this type).
    package var pkcs8PEM: SecureBytes {
        get throws(X509Error) {
            do {
                let pem: String
                switch backing {
                case .p256(let key): pem = try key.pemRepresentation
                case .rsa(let key): pem = try key.pemRepresentation
                }
                return SecureBytes(Array(pem.utf8))
            } catch {
                throw X509Error(error, "encoding a private key as PKCS#8")
            }
        }
    }
}
