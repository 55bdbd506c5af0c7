import Foundation
import OrchardCrypto

/// A trust root ready for path validation: its certificate and its key, imported once (roots are configuration).
struct TrustAnchor: Sendable {
    let certificate: Certificate
    /// `nil` when the root's key is of a kind the Swift validator does not check (OpenSSL decides then).
    let key: SignatureVerificationKey?

    init(_ certificate: Certificate) {
        self.certificate = certificate
        key = try? PathValidation.signatureKey(certificate.subjectPublicKeyInfo)
    }
}

/// RFC 5280 path validation for the chains Orchard verifies, in Swift over the parsed certificates, with
/// OpenSSL only for the signatures: `X509_verify_cert` needs `X509` objects, and OpenSSL 3.0's `d2i_X509`
/// costs about 280 µs a certificate (its key decoder), more than the chain's signatures themselves.
///
/// Cheapest checks first, so a chain that cannot be good costs no cryptography: the path is built by names (and
/// key identifiers) from the leaf to a trust root; then every certificate's validity at the time, the issuers'
/// basic constraints, key usage and path length, and that no certificate carries a critical extension Orchard does
/// not process; then the signatures from the root down (a forged certificate fails at the first one).
///
/// The profile is strict and fails closed: names must match byte for byte, issuers must say cA, keys are
/// P-256, P-384 or RSA (2048 bits or more) and signatures ECDSA or PKCS#1 v1.5 with SHA-256/384/512. Chains
/// that need what this validator does not do (name or policy constraints, policy mappings, an issuer key of
/// another kind) are handed to OpenSSL, but only once every signature up to that point has verified, so nobody
/// without a trusted CA's key can make a verifier take the slow path. Signature algorithms outside the profile
/// are refused.
enum PathValidation {
    enum Outcome {
        /// Leaf first, trust root last.
        case valid([Certificate])
        case invalid(VerificationFailure)
        /// The signatures verify to a trust root, but the chain uses features only OpenSSL checks.
        case needsOpenSSL
    }

    /// The most certificates in a path, the trust root included.
    static let maximumLength = 10

    /// - Parameters:
    ///   - anchors: the self-issued trust roots, where a path ends (as in OpenSSL without partial chains).
    ///   - trustedIntermediates: trusted certificates that are not self-issued: CAs a path may go through on its
    ///     way to an anchor.
    static func validate(
        leaf: Certificate, intermediates presented: [Certificate], anchors: [TrustAnchor],
        trustedIntermediates: [Certificate] = [], at time: Date
    ) -> Outcome {
        let intermediates = trustedIntermediates.isEmpty ? presented : presented + trustedIntermediates
        // A trusted certificate presented as the leaf is its own path (as OpenSSL accepts it).
        if anchors.contains(where: { $0.certificate.derRepresentation == leaf.derRepresentation }) {
            if let failure = timeFailure(leaf, depth: 0, at: time) { return .invalid(failure) }
            return .valid([leaf])
        }

        // 1. The path by names and key identifiers: no cryptography.
        var path = [leaf]
        var used = [Bool](repeating: false, count: intermediates.count)
        var anchor: TrustAnchor?
        while anchor == nil {
            let current = path[path.count - 1]
            guard path.count < maximumLength else {
                return .invalid(VerificationFailure(.invalidChain, "the certificate chain is too long"))
            }
            if let found = anchors.first(where: { issued(current, by: $0.certificate) }) {
                anchor = found
                break
            }
            guard let next = intermediates.indices.first(where: { !used[$0] && issued(current, by: intermediates[$0]) })
            else {
                let what = path.count == 1 ? "the certificate" : "certificate \(path.count - 1) of the chain"
                return .invalid(
                    VerificationFailure(.untrustedChain, "unable to get local issuer certificate (\(what))"))
            }
            used[next] = true
            path.append(intermediates[next])
        }
        guard let anchor else { return .invalid(VerificationFailure(.untrustedChain, "no trust root")) }
        path.append(anchor.certificate)

        // 2. Validity, constraints and extensions: still no cryptography.
        var needsOpenSSL = false
        for (depth, certificate) in path.enumerated() {
            if let failure = timeFailure(certificate, depth: depth, at: time) { return .invalid(failure) }
            switch extensionCheck(certificate, depth: depth) {
            case .failure(let failure): return .invalid(failure)
            case .needsOpenSSL: needsOpenSSL = true
            case .supported: break
            }
            guard depth > 0 else { continue }
            switch issuerCheck(certificate, depth: depth, certificatesBelow: path[1..<depth]) {
            case .some(let failure): return .invalid(failure)
            case .none: break
            }
        }

        // 3. The signatures, from the trust root down.
        var issuerKey = anchor.key
        for depth in stride(from: path.count - 2, through: 0, by: -1) {
            let certificate = path[depth]
            guard let key = issuerKey else { return .needsOpenSSL }
            // An algorithm outside the profile is refused rather than handed to OpenSSL: its signature has not
            // been checked, so anyone could send such chains to make the verifier take the slow path.
            guard let digest = digest(certificate.signatureAlgorithm, for: key.family) else {
                return .invalid(
                    VerificationFailure(
                        isRecognized(certificate.signatureAlgorithm)
                            ? .invalidCertificateSignature : .unsupportedAlgorithm,
                        "certificate \(depth) of the chain: signature algorithm \(certificate.signatureAlgorithm) "
                            + "is not one its issuer's key signs with"
                    ))
            }
            let good = certificate.signature.withUnsafeBytes { s in
                certificate.tbsCertificateBytes.withUnsafeBytes { m in
                    key.isValidSignature(s, message: m, digest: digest)
                }
            }
            switch good {
            case true: break
            case false:
                return .invalid(
                    VerificationFailure(
                        .invalidCertificateSignature,
                        "certificate signature failure (certificate \(depth) of the chain)"))
            case nil:
                // Not a verdict on the bytes (a malformed signature, or no memory): a code callers do not remember.
                return .invalid(
                    VerificationFailure(
                        .invalidChain, "the signature of certificate \(depth) of the chain could not be checked"))
            }
            if depth > 0 {
                guard let next = try? signatureKey(certificate.subjectPublicKeyInfo) else { return .needsOpenSSL }
                issuerKey = next
            }
        }
        return needsOpenSSL ? .needsOpenSSL : .valid(path)
    }

    /// Whether `issuer` may have issued `subject`: its subject name is the subject's issuer name, byte for byte,
    /// and the key identifiers, when both are present, agree.
    static func issued(_ subject: Certificate, by issuer: Certificate) -> Bool {
        guard subject.issuer.derRepresentation == issuer.subject.derRepresentation else { return false }
        if let authority = try? subject.authorityKeyIdentifier, let key = try? issuer.subjectKeyIdentifier,
            authority != key
        {
            return false
        }
        return true
    }

    private static func timeFailure(_ certificate: Certificate, depth: Int, at time: Date) -> VerificationFailure? {
        if time < certificate.notValidBefore {
            return VerificationFailure(
                .certificateNotYetValid, "certificate is not yet valid (certificate \(depth) of the chain)")
        }
        if time > certificate.notValidAfter {
            return VerificationFailure(
                .certificateExpired, "certificate has expired (certificate \(depth) of the chain)")
        }
        return nil
    }

    private enum ExtensionCheck {
        case supported, needsOpenSSL
        case failure(VerificationFailure)
    }

    /// Extensions whose meaning this validator applies, or which do not constrain a path (a critical one of
    /// these is fine).
    private static let processed: [ASN1ObjectIdentifier] = [
        .basicConstraints, .keyUsage, .extendedKeyUsage, .subjectAlternativeName, .subjectKeyIdentifier,
        .authorityKeyIdentifier,
    ]
    private static let certificatePolicies = ASN1ObjectIdentifier(constant: "2.5.29.32")
    /// Extensions that constrain a path in ways only OpenSSL checks.
    private static let constraining: [ASN1ObjectIdentifier] = [
        ASN1ObjectIdentifier(constant: "2.5.29.30"),  // nameConstraints
        certificatePolicies,
        ASN1ObjectIdentifier(constant: "2.5.29.33"),  // policyMappings
        ASN1ObjectIdentifier(constant: "2.5.29.36"),  // policyConstraints
        ASN1ObjectIdentifier(constant: "2.5.29.54"),  // inhibitAnyPolicy
    ]

    private static func extensionCheck(_ certificate: Certificate, depth: Int) -> ExtensionCheck {
        var outcome = ExtensionCheck.supported
        for ext in certificate.extensions {
            if processed.contains(ext.oid) { continue }
            // certificatePolicies only matters when a policy is required, which Orchard never asks: non-critical
            // ones are what every public CA writes (Apple's included).
            if ext.oid == certificatePolicies && !ext.isCritical { continue }
            if constraining.contains(ext.oid) {
                outcome = .needsOpenSSL
                continue
            }
            if ext.isCritical {
                return .failure(
                    VerificationFailure(
                        .invalidChain,
                        "unhandled critical extension \(ext.oid) (certificate \(depth) of the chain)"))
            }
        }
        return outcome
    }

    /// An issuer (depth ≥ 1) must be a CA allowed to sign certificates, with room in its path length for the CAs
    /// below it (self-issued ones do not count, RFC 5280 §4.2.1.9).
    private static func issuerCheck(
        _ certificate: Certificate, depth: Int, certificatesBelow: ArraySlice<Certificate>
    ) -> VerificationFailure? {
        let constraints: BasicConstraints?
        let usage: KeyUsage?
        do {
            constraints = try certificate.basicConstraints
            usage = try certificate.keyUsage
        } catch {
            return VerificationFailure(.invalidChain, "certificate \(depth) of the chain: \(error.message)")
        }
        guard let constraints, constraints.isCA else {
            return VerificationFailure(.invalidChain, "invalid CA certificate (certificate \(depth) of the chain)")
        }
        if let usage, !usage.contains(.keyCertSign) {
            return VerificationFailure(
                .invalidChain, "key usage does not include certificate signing (certificate \(depth) of the chain)")
        }
        if let limit = constraints.pathLength {
            let intermediatesBelow = certificatesBelow.filter { !$0.isSelfIssued }.count
            if intermediatesBelow > limit {
                return VerificationFailure(
                    .invalidChain, "path length constraint exceeded (certificate \(depth) of the chain)")
            }
        }
        return nil
    }

    /// The issuer key of a certificate signature, imported from its parts (P-256, P-384, RSA).
    static func signatureKey(_ info: SubjectPublicKeyInfo) throws -> SignatureVerificationKey {
        switch info.algorithm.algorithm {
        case .ecPublicKey:
            if info.algorithm.parameters == p256Parameters {
                return try SignatureVerificationKey(ecPoint: info.publicKey, family: .p256)
            }
            if info.algorithm.parameters == p384Parameters {
                return try SignatureVerificationKey(ecPoint: info.publicKey, family: .p384)
            }
            throw X509Error(.unsupportedAlgorithm, "only EC keys on P-256 and P-384 are checked in Swift")
        case .rsaEncryption:
            guard info.algorithm.hasNoParameters else {
                throw X509Error(.invalidValue, "rsaEncryption keys take NULL parameters")
            }
            let (modulus, exponent) = try rsaPublicKeyParts(info.publicKey)
            return try SignatureVerificationKey(rsaModulus: modulus, exponent: exponent)
        default:
            throw X509Error(.unsupportedAlgorithm, "public key algorithm \(info.algorithm.algorithm)")
        }
    }

    /// `RSAPublicKey ::= SEQUENCE { modulus INTEGER, publicExponent INTEGER }`, strict DER.
    static func rsaPublicKeyParts(
        _ der: [UInt8]
    ) throws(X509Error) -> (modulus: ArraySlice<UInt8>, exponent: ArraySlice<UInt8>) {
        let element = try ASN1.parse(der, rules: .der)
        try element.expect(.sequence, "RSAPublicKey")
        var reader = try element.children()
        let modulus = try reader.next().integerBytes("RSAPublicKey: modulus")
        let exponent = try reader.next().integerBytes("RSAPublicKey: publicExponent")
        try reader.finish("RSAPublicKey")
        guard modulus.first.map({ $0 & 0x80 == 0 }) ?? false, exponent.first.map({ $0 & 0x80 == 0 }) ?? false else {
            throw X509Error(.invalidValue, "RSAPublicKey: a negative modulus or exponent")
        }
        return (modulus, exponent)
    }

    private static let p256Parameters = DERWriter.encode { $0.appendObjectIdentifier(.prime256v1) }
    private static let p384Parameters = DERWriter.encode { $0.appendObjectIdentifier(.secp384r1) }
    private static let ecdsaWithSHA512 = ASN1ObjectIdentifier(constant: "1.2.840.10045.4.3.4")
    private static let sha384WithRSAEncryption = ASN1ObjectIdentifier(constant: "1.2.840.113549.1.1.12")
    private static let sha512WithRSAEncryption = ASN1ObjectIdentifier(constant: "1.2.840.113549.1.1.13")

    private static func isRecognized(_ algorithm: AlgorithmIdentifier) -> Bool {
        [
            .ecdsaWithSHA256, .ecdsaWithSHA384, ecdsaWithSHA512, .sha256WithRSAEncryption, sha384WithRSAEncryption,
            sha512WithRSAEncryption,
        ].contains(algorithm.algorithm)
    }

    /// The digest of a certificate's signature algorithm when it suits the issuer's key; `nil` otherwise.
    private static func digest(
        _ algorithm: AlgorithmIdentifier, for family: SignatureVerificationKey.Family
    ) -> SignatureVerificationKey.Digest? {
        switch family {
        case .p256, .p384:
            guard algorithm.parameters == nil else { return nil }
            switch algorithm.algorithm {
            case .ecdsaWithSHA256: return .sha256
            case .ecdsaWithSHA384: return .sha384
            case ecdsaWithSHA512: return .sha512
            default: return nil
            }
        case .rsa:
            guard algorithm.hasNoParameters else { return nil }
            switch algorithm.algorithm {
            case .sha256WithRSAEncryption: return .sha256
            case sha384WithRSAEncryption: return .sha384
            case sha512WithRSAEncryption: return .sha512
            default: return nil
            }
        }
    }
}
