public import Foundation
public import OrchardCrypto

/// A public key that certificates, CSRs and CMS signers carry: P-256 (ECDSA-SHA256) or RSA (2048 bits
/// or more, PKCS#1 v1.5 with SHA-256).
public struct CertificatePublicKey: Hashable, Sendable {
    enum Backing: Sendable {
        case p256(P256.Signing.PublicKey)
        case rsa(RSA.PublicKey)
    }

    let backing: Backing
    /// The DER SubjectPublicKeyInfo.
    public let derRepresentation: [UInt8]

    /// A P-256 key (ECDSA-SHA256).
    public init(_ key: P256.Signing.PublicKey) {
        backing = .p256(key)
        derRepresentation = key.derRepresentation
    }

    /// An RSA key (PKCS#1 v1.5 with SHA-256).
    public init(_ key: RSA.PublicKey) {
        backing = .rsa(key)
        derRepresentation = key.derRepresentation
    }

    /// The key of a parsed SubjectPublicKeyInfo. P-256 keys decode without OpenSSL's decoder; other
    /// curves and algorithms give ``X509Error/Code/unsupportedAlgorithm``.
    public init(_ info: SubjectPublicKeyInfo) throws(X509Error) {
        switch info.algorithm.algorithm {
        case .ecPublicKey:
            guard info.algorithm.parameters == Self.p256Parameters else {
                throw X509Error(.unsupportedAlgorithm, "only EC keys on the named curve P-256 are supported")
            }
            do {
                backing = .p256(try P256.Signing.PublicKey(x963Representation: info.publicKey))
            } catch {
                throw X509Error(error, "the P-256 public key")
            }
        case .rsaEncryption:
            guard info.algorithm.hasNoParameters else {
                throw X509Error(.invalidValue, "an rsaEncryption key takes NULL parameters")
            }
            let (modulus, exponent) = try PathValidation.rsaPublicKeyParts(info.publicKey)
            do {
                backing = .rsa(try RSA.PublicKey(modulus: modulus, exponent: exponent))
            } catch {
                throw X509Error(error, "the RSA public key")
            }
        default:
            throw X509Error(.unsupportedAlgorithm, "public key algorithm \(info.algorithm.algorithm) is not supported")
        }
        derRepresentation = info.derRepresentation
    }

    /// The named-curve parameters of a P-256 key (encoded once, not per key).
    private static let p256Parameters = DERWriter.encode { $0.appendObjectIdentifier(.prime256v1) }

    /// A DER SubjectPublicKeyInfo.
    public init(derRepresentation: [UInt8]) throws(X509Error) {
        try self.init(SubjectPublicKeyInfo(derEncoded: derRepresentation))
    }

    /// The key, if it is P-256.
    public var p256: P256.Signing.PublicKey? {
        if case .p256(let key) = backing { return key }
        return nil
    }

    /// The key, if it is RSA.
    public var rsa: RSA.PublicKey? {
        if case .rsa(let key) = backing { return key }
        return nil
    }

    /// The signature algorithm this key signs with in Orchard.
    public var signatureAlgorithm: AlgorithmIdentifier {
        switch backing {
        case .p256: .ecdsaWithSHA256
        case .rsa: .sha256WithRSAEncryption
        }
    }

    /// Whether `signature` over `data` verifies under this key with `algorithm`: ecdsa-with-SHA256 for
    /// P-256 keys, sha256WithRSAEncryption for RSA keys. Any other pairing is `false`.
    public func isValidSignature(
        _ signature: some DataProtocol, for data: some DataProtocol, algorithm: ASN1ObjectIdentifier
    ) -> Bool {
        switch backing {
        case .p256(let key):
            guard algorithm == .ecdsaWithSHA256 else { return false }
            return withContiguousBytes(signature) { s in
                withContiguousBytes(data) { d in key.impl.isValidSignature(derSignature: s, message: d) }
            }
        case .rsa(let key):
            guard algorithm == .sha256WithRSAEncryption else { return false }
            return key.isValidPKCS1v15Signature(signature, for: data)
        }
    }

    /// Keys are equal when their SubjectPublicKeyInfo DER is.
    public static func == (a: Self, b: Self) -> Bool { a.derRepresentation == b.derRepresentation }
    public func hash(into hasher: inout Hasher) { hasher.combine(derRepresentation) }
}

/// A private key that signs certificates, CSRs and CMS: P-256 (ECDSA-SHA256) or RSA (PKCS#1 v1.5,
/// SHA-256). Its descriptions never show the key.
public struct CertificatePrivateKey: Sendable, CustomStringConvertible, CustomDebugStringConvertible,
    CustomReflectable
{
    enum Backing: Sendable {
        case p256(P256.Signing.PrivateKey)
        case rsa(RSA.PrivateKey)
    }

    let backing: Backing

    /// A P-256 signing key.
    public init(_ key: P256.Signing.PrivateKey) { backing = .p256(key) }
    /// An RSA signing key.
    public init(_ key: RSA.PrivateKey) { backing = .rsa(key) }

    /// The matching public key.
    public var publicKey: CertificatePublicKey {
        switch backing {
        case .p256(let key): CertificatePublicKey(key.publicKey)
        case .rsa(let key): CertificatePublicKey(key.publicKey)
        }
    }

    /// ecdsa-with-SHA256 for P-256, sha256WithRSAEncryption for RSA.
    public var signatureAlgorithm: AlgorithmIdentifier { publicKey.signatureAlgorithm }

    /// The signature of `data` with ``signatureAlgorithm``: a DER ECDSA-Sig-Value or an RSA signature.
    public func signature(for data: some DataProtocol) throws(X509Error) -> [UInt8] {
        do {
            switch backing {
            case .p256(let key): return try key.signature(for: data).derRepresentation
            case .rsa(let key): return try key.pkcs1v15Signature(for: data)
            }
        } catch {
            throw X509Error(error, "signing")
        }
    }

    /// The key type only; never the key.
    public var description: String {
        switch backing {
        case .p256: "CertificatePrivateKey(P-256, <redacted>)"
        case .rsa(let key): "CertificatePrivateKey(RSA-\(key.keySizeInBits), <redacted>)"
        }
    }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}

extension Certificate {
    /// The subject's public key, decoded. Throws ``X509Error/Code/unsupportedAlgorithm`` for keys other
    /// than P-256 and RSA (Apple Root CA - G3 is P-384: its signatures are checked by OpenSSL in
    /// ``CertificateChainVerifier``).
    public var publicKey: CertificatePublicKey {
        get throws(X509Error) { try CertificatePublicKey(subjectPublicKeyInfo) }
    }

    /// Whether this certificate's signature verifies under `issuerKey` (P-256 or RSA issuers).
    public func isSignature(validUnder issuerKey: CertificatePublicKey) -> Bool {
        issuerKey.isValidSignature(signature, for: tbsCertificateBytes, algorithm: signatureAlgorithm.algorithm)
    }
}
