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
    // Guarded by `lock`.
    private let lock = NSLock()
    nonisolated(unsafe) private var secureElements: [DERKey: SecureElementEntry] = [:]
    nonisolated(unsafe) private var processing: [DERKey: (Certificate, MerchantProcessingPublicKey)] = [:]
    private let deviceCA: Certificate
    private let deviceCAKey: CertificatePublicKey?

    init(deviceCA: Certificate) {
        self.deviceCA = deviceCA
        deviceCAKey = try? deviceCA.publicKey
    }

    /// The certificate and P-256 key of `der` if the device CA issued it (signature checked on first use).
    func secureElement(_ der: [UInt8]) -> SecureElementEntry? {
        let cacheKey = DERKey(der)
        if let hit = lock.withLock({ secureElements[cacheKey] }) { return hit }
        guard let deviceCAKey, let certificate = try? Certificate(derEncoded: der),
            certificate.issuer == deviceCA.subject, certificate.isSignature(validUnder: deviceCAKey),
            let key = (try? certificate.publicKey)?.p256
        else { return nil }
        let entry = SecureElementEntry(certificate: certificate, key: key)
        lock.withLock {
            if secureElements.count >= Self.capacity { secureElements.removeAll(keepingCapacity: true) }
            secureElements[cacheKey] = entry
        }
        return entry
    }

    /// A processing certificate and the key a token is encrypted to, parsed once per certificate.
    func processingCertificate(_ der: [UInt8]) throws -> (Certificate, MerchantProcessingPublicKey) {
        let key = DERKey(der)
        if let hit = lock.withLock({ processing[key] }) { return hit }
        let certificate = try Certificate(derEncoded: der)
        let entry = (certificate, try MerchantProcessingPublicKey(processingCertificate: certificate))
        lock.withLock {
            if processing.count >= Self.capacity { processing.removeAll(keepingCapacity: true) }
            processing[key] = entry
        }
        return entry
    }
}

/// A certificate's DER as a dictionary key, hashed as one block of bytes: `[UInt8]` hashes byte by byte, which cost
/// about 1 µs per lookup of a certificate-sized key (1 % of an in-app exchange's CPU, docs/performance.md).
struct DERKey: Hashable, Sendable {
    let bytes: [UInt8]
    init(_ bytes: [UInt8]) { self.bytes = bytes }
    func hash(into hasher: inout Hasher) { bytes.withUnsafeBytes { hasher.combine(bytes: $0) } }
}
