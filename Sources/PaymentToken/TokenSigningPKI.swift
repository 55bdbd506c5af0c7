public import Foundation
public import OrchardCrypto
public import OrchardX509

/// A token-signing PKI shaped like Apple's: a root, an integration CA carrying marker
/// 1.2.840.113635.100.6.2.14, and a signing leaf carrying 1.2.840.113635.100.6.29 (both markers ASN.1 NULL,
/// non-critical). The Pay server signs tokens with the leaf; merchants trust the root.
///
/// The same root and integration CA issue one leaf per `SigningLeafKind`
/// (``issuingLeaf(for:organization:notValidBefore:leafLifetime:random:)``): a value whose leaf is of another kind
/// signs merchant sessions, association files or capability statements, and each kind's verifier refuses the
/// others' leaves.
public struct TokenSigningPKI: Sendable {
    /// The self-signed root merchants trust.
    public let root: Certificate
    /// The root's private key, which signs the intermediate.
    public let rootKey: CertificatePrivateKey
    /// The integration CA, carrying marker 1.2.840.113635.100.6.2.14.
    public let intermediate: Certificate
    /// The intermediate's private key, which signs the leaf.
    public let intermediateKey: CertificatePrivateKey
    /// The token-signing leaf, carrying marker 1.2.840.113635.100.6.29.
    public let leaf: Certificate
    /// The leaf's private key, which signs tokens.
    public let leafKey: CertificatePrivateKey

    /// A PKI from existing certificates and keys (loaded from a deployment); nothing is checked here.
    public init(
        root: Certificate, rootKey: CertificatePrivateKey, intermediate: Certificate,
        intermediateKey: CertificatePrivateKey, leaf: Certificate, leafKey: CertificatePrivateKey
    ) {
        self.root = root
        self.rootKey = rootKey
        self.intermediate = intermediate
        self.intermediateKey = intermediateKey
        self.leaf = leaf
        self.leafKey = leafKey
    }

    /// Generates the three levels with fresh P-256 keys. The leaf is valid for `leafLifetime` (Apple rotates
    /// its leaves about every five years), the CAs until `notValidAfter`.
    public static func generate(
        organization: String = "Orchard", notValidBefore: Date, notValidAfter: Date,
        leafLifetime: TimeInterval = 5 * 365 * 86_400, random: any RandomSource = SystemRandom()
    ) throws(X509Error) -> TokenSigningPKI {
        let rootKey = try Self.newKey()
        let root = try Certificate.issue(
            subject: DistinguishedName([.commonName("\(organization) Root CA"), .organization(organization)]),
            publicKey: rootKey.publicKey, issuer: .selfSigned(rootKey), notValidBefore: notValidBefore,
            notValidAfter: notValidAfter,
            extensions: [.basicConstraints(isCA: true), .keyUsage([.keyCertSign, .cRLSign])], random: random)
        let intermediateKey = try Self.newKey()
        let intermediate = try Certificate.issue(
            subject: DistinguishedName([
                .commonName("\(organization) Application Integration CA"), .organization(organization),
            ]),
            publicKey: intermediateKey.publicKey, issuer: .certificate(root, key: rootKey),
            notValidBefore: notValidBefore, notValidAfter: notValidAfter,
            extensions: [
                .basicConstraints(isCA: true, pathLength: 0), .keyUsage([.keyCertSign, .cRLSign]),
                .appleApplicationIntegrationCAMarker,
            ], random: random)
        let chain = TokenSigningPKI(
            root: root, rootKey: rootKey, intermediate: intermediate, intermediateKey: intermediateKey,
            leaf: intermediate, leafKey: intermediateKey)
        return try chain.issuingLeaf(
            for: .paymentToken, organization: organization, notValidBefore: notValidBefore,
            leafLifetime: leafLifetime, random: random)
    }

    /// The kind of object the leaf signs (the one signing-leaf marker it carries), or nil when it carries none or
    /// several.
    public var kind: SigningLeafKind? {
        let kinds = SigningLeafKind.kinds(of: leaf)
        return kinds.count == 1 ? kinds[0] : nil
    }

    /// The same root and integration CA with a new leaf of `kind` (a fresh P-256 key, digital signature only,
    /// the kind's marker), valid from `notValidBefore` for `leafLifetime` but never past the integration CA.
    public func issuingLeaf(
        for kind: SigningLeafKind, organization: String = "Orchard", notValidBefore: Date,
        leafLifetime: TimeInterval = 5 * 365 * 86_400, random: any RandomSource = SystemRandom()
    ) throws(X509Error) -> TokenSigningPKI {
        let name = organization.lowercased()
        let leafKey = try Self.newKey()
        let leaf = try Certificate.issue(
            subject: DistinguishedName([
                .commonName(kind == .paymentToken ? "\(name)-smp-broker-sign" : "\(name)-\(kind)-sign"),
                .organization(organization),
            ]),
            publicKey: leafKey.publicKey, issuer: .certificate(intermediate, key: intermediateKey),
            notValidBefore: notValidBefore,
            notValidAfter: min(intermediate.notValidAfter, notValidBefore + leafLifetime),
            extensions: [.basicConstraints(isCA: false), .keyUsage([.digitalSignature]), kind.markerExtension],
            random: random)
        return TokenSigningPKI(
            root: root, rootKey: rootKey, intermediate: intermediate, intermediateKey: intermediateKey, leaf: leaf,
            leafKey: leafKey)
    }

    /// A signer that signs with the leaf as Apple does.
    public func signer(clock: any WallClock = SystemClock()) throws(PaymentTokenError) -> CMSTokenSigner {
        try CMSTokenSigner(leaf: leaf, key: leafKey, intermediate: intermediate, clock: clock)
    }

    private static func newKey() throws(X509Error) -> CertificatePrivateKey {
        do {
            return CertificatePrivateKey(try P256.Signing.PrivateKey())
        } catch {
            throw X509Error(.invalidKey, "P-256 key generation failed: \(error)")
        }
    }
}
