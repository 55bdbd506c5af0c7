/// What a signing leaf under a token-signing root (root → integration CA with 1.2.840.113635.100.6.2.14 → leaf)
/// signs. Each kind has its own leaf, marked by its own extension (ASN.1 NULL, non-critical: OpenSSL refuses an
/// unknown critical one): Apple's 1.2.840.113635.100.6.29 for payment tokens, an Orchard marker (under
/// ``ASN1ObjectIdentifier/orchard``) for the kinds Apple marks no leaf of its own for. A verifier of one kind
/// refuses the leaves of the others (``ChainPolicy/signingLeaf(_:)``), so a key that signs one kind cannot
/// produce another.
public enum SigningLeafKind: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// Payment tokens (`EC_v1`, `RSA_v1`): Apple's marker 1.2.840.113635.100.6.29.
    case paymentToken = "payment-token"
    /// Merchant sessions the gateway gives a merchant's server.
    case merchantSession = "merchant-session"
    /// Domain-association files a merchant serves from its site.
    case domainAssociationFile = "domain-association-file"
    /// Capability statements for `canMakePaymentsWithActiveCard`.
    case capabilityStatement = "capability-statement"

    /// The marker extension's identifier.
    public var marker: ASN1ObjectIdentifier {
        switch self {
        case .paymentToken: .appleTokenSigningLeaf
        case .merchantSession: .orchardMerchantSessionSigningLeaf
        case .domainAssociationFile: .orchardDomainAssociationSigningLeaf
        case .capabilityStatement: .orchardCapabilityStatementSigningLeaf
        }
    }

    /// The marker extension, for `Certificate.issue`: ASN.1 NULL, non-critical.
    public var markerExtension: Certificate.Extension { Certificate.Extension(oid: marker, value: [0x05, 0x00]) }

    /// `payment-token`, `merchant-session`, `domain-association-file` or `capability-statement`.
    public var description: String { rawValue }

    /// The kinds whose markers `certificate` carries, in declaration order (one for every signing leaf Orchard
    /// issues, none for any other certificate).
    public static func kinds(of certificate: Certificate) -> [SigningLeafKind] {
        allCases.filter { certificate.hasExtension($0.marker) }
    }

    /// Why `chain` (leaf first) is not a signing chain of this kind, or nil when it is: its leaf carries this
    /// kind's marker and no other kind's, and the certificate that issued it 1.2.840.113635.100.6.2.14. The
    /// reason names the missing marker and the kind the leaf is instead.
    public func chainViolation(_ chain: [Certificate]) -> String? {
        guard chain.count >= 2 else { return "the chain has no intermediate certificate" }
        let kinds = Self.kinds(of: chain[0])
        guard kinds.contains(self) else {
            let instead = kinds.isEmpty ? "it carries no signing-leaf marker" : "it is a \(Self.named(kinds))"
            return "the leaf certificate lacks the marker extension \(marker) of a \(self) signing leaf (\(instead))"
        }
        guard kinds.count == 1 else {
            return "the leaf certificate carries the markers of a \(Self.named(kinds)): a signing leaf signs one kind"
        }
        guard chain[1].hasExtension(.appleApplicationIntegrationCA) else {
            return "the intermediate certificate lacks the marker extension 1.2.840.113635.100.6.2.14"
        }
        return nil
    }

    private static func named(_ kinds: [SigningLeafKind]) -> String {
        kinds.map { "\($0) signing leaf (\($0.marker))" }.joined(separator: " and a ")
    }
}

extension ChainPolicy {
    /// Signing chains of `kind` (``SigningLeafKind/chainViolation(_:)``): the leaf carries that kind's marker
    /// and no other's, its issuer 1.2.840.113635.100.6.2.14. A refusal is a ``VerificationFailure/Code/policyViolation``
    /// whose message names the missing marker.
    public static func signingLeaf(_ kind: SigningLeafKind) -> ChainPolicy {
        switch kind {
        case .paymentToken: .applePaymentTokenSigning
        default: ChainPolicy(name: "\(kind) signing") { kind.chainViolation($0) }
        }
    }
}
