import Foundation
public import OrchardCrypto
import OrchardX509

/// A throwaway TLS identity made in memory: a self-signed P-256 certificate for `localhost` and
/// `127.0.0.1`. For local tools (the benchmark, a development echo server) and tests; a client must trust
/// exactly this certificate (it is its own root), so nothing else accepts it. Issued by OrchardX509, the
/// project's one certificate issuer.
public struct EphemeralCertificate: Sendable {
    public let certificatePEM: String
    public let privateKeyPEM: SecureBytes

    /// Generates a key and a certificate valid from an hour ago for `days` days (1 to 3650).
    public init(commonName: String = "localhost", days: Int = 30) throws(HTTPError) {
        guard (1...3650).contains(days) else {
            throw HTTPError(.invalidConfiguration, "an ephemeral certificate lasts 1 to 3650 days, not \(days)")
        }
        let now = Date()
        do {
            let key = CertificatePrivateKey(try P256.Signing.PrivateKey())
            let certificate = try Certificate.issue(
                subject: DistinguishedName([.commonName(commonName)]), publicKey: key.publicKey,
                issuer: .selfSigned(key), notValidBefore: now - 3600, notValidAfter: now + Double(days) * 86_400,
                extensions: [
                    .basicConstraints(isCA: false), .keyUsage(.digitalSignature),
                    .extendedKeyUsage([.serverAuth, .clientAuth]),
                    try .subjectAlternativeNames(dnsNames: ["localhost"], ipAddresses: [[127, 0, 0, 1]]),
                ])
            certificatePEM = certificate.pemRepresentation
            privateKeyPEM = try key.pkcs8PEM
        } catch {
            throw HTTPError(.internalFailure, "making an ephemeral certificate failed: \(error)")
        }
    }
}
