public import Foundation

/// Why a chain or a signature was rejected: a value callers branch on, not a thrown error.
public struct VerificationFailure: Hashable, Sendable, CustomStringConvertible {
    /// The kind of rejection; extensible without breaking callers.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case untrustedChain, certificateExpired, certificateNotYetValid, invalidCertificateSignature
            case invalidChain, policyViolation, signerNotFound, digestMismatch, invalidSignature
            case unsupportedAlgorithm, missingAttribute, invalidAttribute, unexpectedContent
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// No chain leads from the certificate to one of the trust roots.
        public static let untrustedChain = Code(.untrustedChain)
        /// A certificate of the chain had expired at the validation time.
        public static let certificateExpired = Code(.certificateExpired)
        /// A certificate of the chain was not yet valid at the validation time.
        public static let certificateNotYetValid = Code(.certificateNotYetValid)
        /// A certificate's signature does not verify under its issuer's key.
        public static let invalidCertificateSignature = Code(.invalidCertificateSignature)
        /// Any other chain failure OpenSSL reports (constraints, key usage, critical extensions).
        public static let invalidChain = Code(.invalidChain)
        /// The chain is valid but fails the verifier's ``ChainPolicy`` (e.g. Apple's marker extensions).
        public static let policyViolation = Code(.policyViolation)
        /// No certificate in the signature matches the signer identifier.
        public static let signerNotFound = Code(.signerNotFound)
        /// The messageDigest attribute is not the digest of the content.
        public static let digestMismatch = Code(.digestMismatch)
        /// The signature does not verify under the signer's key.
        public static let invalidSignature = Code(.invalidSignature)
        /// A digest or signature algorithm Orchard does not verify.
        public static let unsupportedAlgorithm = Code(.unsupportedAlgorithm)
        /// A required signed attribute (content type, message digest, signing time) is missing.
        public static let missingAttribute = Code(.missingAttribute)
        /// A signed attribute is present but wrong (content type mismatch, algorithm protection mismatch).
        public static let invalidAttribute = Code(.invalidAttribute)
        /// The signature carries its content where a detached signature was expected.
        public static let unexpectedContent = Code(.unexpectedContent)

        public var description: String { base.rawValue }
    }

    /// The kind of rejection.
    public let code: Code
    /// What was rejected and why; never contains key material.
    public let message: String

    /// A failure with a human-readable reason.
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code): \(message)" }
}

/// A chain that verified: leaf first, trust root last.
public struct VerifiedChain: Hashable, Sendable {
    /// Leaf first, root last; never empty.
    public let certificates: [Certificate]
    /// When every certificate of the chain is valid: the latest notBefore to the earliest notAfter.
    public let validityInterval: ClosedRange<Date>

    /// The end-entity certificate.
    public var leaf: Certificate { certificates[0] }
    /// The trust root the chain ends in.
    public var root: Certificate { certificates[certificates.count - 1] }
}

/// The outcome of a chain verification.
public enum ChainVerificationResult: Sendable {
    case valid(VerifiedChain)
    case invalid(VerificationFailure)

    /// Whether the outcome is `.valid`.
    public var isValid: Bool {
        if case .valid = self { return true }
        return false
    }

    /// The reason for an `.invalid` outcome.
    public var failure: VerificationFailure? {
        if case .invalid(let failure) = self { return failure }
        return nil
    }
}

/// Extra rules a chain must satisfy after OpenSSL has validated it (leaf first, root last).
public struct ChainPolicy: Sendable {
    /// Names the policy in failure messages.
    public let name: String
    private let rule: @Sendable ([Certificate]) -> String?

    /// `rule` returns `nil` to accept the chain, or the reason to reject it.
    public init(name: String, rule: @escaping @Sendable (_ chain: [Certificate]) -> String?) {
        self.name = name
        self.rule = rule
    }

    /// The failure for `chain`, or `nil` if it satisfies the policy.
    public func evaluate(_ chain: [Certificate]) -> VerificationFailure? {
        rule(chain).map { VerificationFailure(.policyViolation, "\(name): \($0)") }
    }

    /// Apple's rule for the certificates embedded in a payment-token signature
    /// (``ApplePayCertificates/embeddedCertificatesViolation(_:)``).
    public static let applePaymentTokenEmbeddedCertificates = ChainPolicy(name: "Apple payment token certificates") {
        ApplePayCertificates.embeddedCertificatesViolation($0)
    }

    /// Accepts every chain OpenSSL accepts.
    public static let none = ChainPolicy(name: "none") { _ in nil }

    /// Apple's payment-token signing chain: the leaf carries 1.2.840.113635.100.6.29 and its issuer
    /// 1.2.840.113635.100.6.2.14 (presence only, as Apple's instructions say); a leaf that also carries the
    /// marker of another kind of signing leaf (``SigningLeafKind``) is refused.
    public static let applePaymentTokenSigning = ChainPolicy(name: "Apple payment token signing") { chain in
        ApplePayCertificates.tokenSigningChainViolation(chain)
    }
}

/// Apple's certificate conventions for payment tokens.
public enum ApplePayCertificates {
    /// Checks Apple's marker extensions on a payment-token signing chain (leaf first): the leaf has
    /// 1.2.840.113635.100.6.29 (and no other ``SigningLeafKind``'s marker) and the certificate that issued it has
    /// 1.2.840.113635.100.6.2.14. Returns `nil` when both are present, or the reason the chain is not acceptable.
    public static func tokenSigningChainViolation(_ chain: [Certificate]) -> String? {
        SigningLeafKind.paymentToken.chainViolation(chain)
    }

    /// Checks the certificates embedded in a payment-token signature: exactly two, one leaf with
    /// 1.2.840.113635.100.6.29 and one intermediate with 1.2.840.113635.100.6.2.14 (Apple's reference:
    /// no extra certificate, no second leaf). Returns `nil` when they are acceptable.
    public static func embeddedCertificatesViolation(_ certificates: [Certificate]) -> String? {
        guard certificates.count == 2 else {
            return
                "the signature embeds \(certificates.count) certificates; Apple's embed exactly a leaf and an intermediate"
        }
        let leaves = certificates.filter { $0.hasExtension(.appleTokenSigningLeaf) }
        let intermediates = certificates.filter { $0.hasExtension(.appleApplicationIntegrationCA) }
        guard leaves.count == 1, intermediates.count == 1, leaves[0] != intermediates[0] else {
            return "the embedded certificates must be one leaf with the marker extension 1.2.840.113635.100.6.29 "
                + "and one intermediate with 1.2.840.113635.100.6.2.14"
        }
        return nil
    }

    /// Whether the leaf and intermediate carry Apple's payment-token markers.
    public static func hasTokenSigningMarkers(leaf: Certificate, intermediate: Certificate) -> Bool {
        tokenSigningChainViolation([leaf, intermediate]) == nil
    }
}
