import Foundation
import OrchardCrypto
import OrchardX509

/// Entry points for `orchard bench crypto`: each runs one operation so the benchmark can time it.
enum X509Benchmarks {
    /// Parses a certificate with the Swift DER reader.
    static func parseCertificateSwift(_ der: [UInt8]) throws(X509Error) -> Certificate {
        try Certificate(derEncoded: der)
    }

    /// Decodes a certificate with OpenSSL's `d2i_X509` (the baseline).
    static func parseCertificateOpenSSL(_ der: [UInt8]) throws(X509Error) -> OpenSSLCertificate {
        try OpenSSLCertificate(der: der)
    }

    /// An Apple-shaped detached CMS signature (BER, leaf + intermediate embedded, signingTime) over
    /// `contentSize` bytes, from a fresh P-256 PKI valid now, with a verifier whose chain cache is warm.
    struct AppleStyleSignature: Sendable {
        let verifier: CMSVerifier
        let roots: [Certificate]
        let signature: [UInt8]
        let content: [UInt8]
        let signingTime: Date
        /// The ceiling: the one ECDSA verification the fast path cannot avoid.
        let leafKey: P256.Signing.PublicKey
        let signedAttributes: [UInt8]
        let signatureValue: P256.Signing.ECDSASignature

        /// The fast path: Swift BER walk, cached chain, digest check, one ECDSA verify.
        func verifyFast() -> Bool {
            (try? verifier.verifyDetachedSignature(signature, content: content, at: .signingTime).isValid) ?? false
        }

        /// The OpenSSL path: `d2i_CMS_ContentInfo` + `CMS_verify` with a one-root store.
        func verifyOpenSSL() -> Bool {
            OpenSSLReference.cmsVerifyDetached(signature: signature, content: content, roots: roots, at: signingTime)
        }

        /// One ECDSA P-256 verification of the same signature over the same signed attributes.
        func verifyCeiling() -> Bool {
            leafKey.isValidSignature(signatureValue, for: signedAttributes)
        }
    }

    static func makeAppleStyleSignature(
        contentSize: Int = 1024, clock: any WallClock = SystemClock()
    ) throws(X509Error) -> AppleStyleSignature {
        let now = clock.now()
        let start = now - 86_400
        let end = now + 5 * 365 * 86_400
        let rootKey: CertificatePrivateKey
        let intermediateKey: CertificatePrivateKey
        let leafPrivate: P256.Signing.PrivateKey
        do {
            rootKey = CertificatePrivateKey(try P256.Signing.PrivateKey())
            intermediateKey = CertificatePrivateKey(try P256.Signing.PrivateKey())
            leafPrivate = try P256.Signing.PrivateKey()
        } catch {
            throw X509Error(error, "benchmark keys")
        }
        let leafKey = CertificatePrivateKey(leafPrivate)
        let root = try Certificate.issue(
            subject: DistinguishedName([.commonName("Bench Root CA - G3"), .organization("Orchard")]),
            publicKey: rootKey.publicKey, issuer: .selfSigned(rootKey), notValidBefore: start, notValidAfter: end,
            extensions: [.basicConstraints(isCA: true), .keyUsage([.keyCertSign, .cRLSign])])
        let intermediate = try Certificate.issue(
            subject: DistinguishedName([.commonName("Bench Application Integration CA - G3"), .organization("Orchard")]
            ),
            publicKey: intermediateKey.publicKey, issuer: .certificate(root, key: rootKey), notValidBefore: start,
            notValidAfter: end,
            extensions: [
                .basicConstraints(isCA: true, pathLength: 0), .keyUsage([.keyCertSign, .cRLSign]),
                .appleApplicationIntegrationCAMarker,
            ])
        let leaf = try Certificate.issue(
            subject: DistinguishedName([.commonName("ecc-smp-broker-sign_UC4-BENCH"), .organization("Orchard")]),
            publicKey: leafKey.publicKey, issuer: .certificate(intermediate, key: intermediateKey),
            notValidBefore: start, notValidAfter: end,
            extensions: [.basicConstraints(isCA: false), .keyUsage(.digitalSignature), .appleTokenSigningLeafMarker])
        let content = [UInt8]((0..<contentSize).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        let signature = try CMS.signDetached(
            content, signer: leaf, key: leafKey, certificates: [leaf, intermediate], signingTime: now,
            encoding: .berIndefiniteLength, includeAlgorithmProtection: true)
        let verifier = try CMSVerifier(trustRoots: [root], policy: .applePaymentTokenSigning, clock: clock)
        guard case .valid = try verifier.verifyDetachedSignature(signature, content: content, at: .signingTime) else {
            throw X509Error(.cryptoFailure, "the benchmark signature does not verify")
        }
        guard let signer = try CMSSignedData(berEncoded: signature).signers.first,
            var signedAttributes = signer.signedAttributesBytes
        else { throw X509Error(.cryptoFailure, "the benchmark signature has no signer") }
        // The signature covers the attributes' DER with their [0] IMPLICIT tag read as SET (RFC 5652 §5.4).
        signedAttributes[0] = 0x31
        let value: P256.Signing.ECDSASignature
        do {
            value = try P256.Signing.ECDSASignature(derRepresentation: signer.signature)
        } catch {
            throw X509Error(error, "benchmark signature value")
        }
        return AppleStyleSignature(
            verifier: verifier, roots: [root], signature: signature, content: content,
            signingTime: Date(timeIntervalSince1970: now.timeIntervalSince1970.rounded(.down)),
            leafKey: leafPrivate.publicKey, signedAttributes: signedAttributes, signatureValue: value)
    }
}
