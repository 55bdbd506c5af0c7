public import Foundation
import OrchardCrypto
public import OrchardX509
public import PaymentToken
public import WebMerchantAPI

/// Domain-association files: the Pay server issues them signed by its domain-association signing leaf (under the
/// token root's integration CA, as Apple's `ecc-smp-broker-sign` is; with its own key and marker, so no other kind
/// of leaf can sign a file) and checks a file fetched from a merchant's site against its token-signing root, that
/// leaf's marker and the merchant it must be for.
public final class AssociationFiles: Sendable {
    private let tokenSigning: TokenSigningPKI
    private let verifier: CMSVerifier
    private let legacy: (signer: LegacySigner, verifier: CMSVerifier)?

    /// The leaf that signed the files of a deployment made before one leaf per kind (its token-signing leaf), and
    /// until when: merchants keep serving such a file until they download a new one, so it stays valid, signed by
    /// that one certificate and created before `until`, and nothing else that leaf signs is taken for a file.
    public struct LegacySigner: Sendable {
        /// The token-signing leaf of this deployment.
        public let leaf: Certificate
        /// The latest `createdOn` accepted: when the domain-association signing leaf was issued.
        public let until: Date

        public init(leaf: Certificate, until: Date) {
            self.leaf = leaf
            self.until = until
        }
    }

    /// `tokenSigning`'s leaf signs the files: the domain-association signing leaf (``SigningLeaves``); `legacy`
    /// also accepts the files its leaf signed before (``SigningLeaves/legacyAssociationFileSigner``).
    public init(tokenSigning: TokenSigningPKI, legacy: LegacySigner? = nil, clock: any WallClock) throws(X509Error) {
        self.tokenSigning = tokenSigning
        verifier = try CMSVerifier(
            trustRoots: [tokenSigning.root], policy: .signingLeaf(.domainAssociationFile), cacheCapacity: 16,
            clock: clock)
        self.legacy = try legacy.map { (signer) throws(X509Error) in
            (
                signer,
                try CMSVerifier(
                    trustRoots: [tokenSigning.root], policy: .applePaymentTokenSigning, cacheCapacity: 4, clock: clock)
            )
        }
    }

    /// The merchant's wire identifier: the 64 upper-case hex digits of SHA-256(merchant ID).
    public static func merchantHash(_ merchantIdentifier: String) -> String {
        Hex.encode(SHA256.hash(Array(merchantIdentifier.utf8))).uppercased()
    }

    /// A new file for `merchantIdentifier`, created at `now` (the CMS signingTime is the same second).
    public func issue(merchantIdentifier: String, at now: Date) throws(X509Error) -> DomainAssociationFile {
        let createdOn = Int64((now.timeIntervalSince1970 * 1000).rounded(.down))
        let pspId = Self.merchantHash(merchantIdentifier)
        let content = DomainAssociationFile.signedContent(pspId: pspId, createdOn: createdOn)
        let signature = try CMS.signDetached(
            content, signer: tokenSigning.leaf, key: tokenSigning.leafKey,
            certificates: [tokenSigning.leaf, tokenSigning.intermediate],
            signingTime: Date(timeIntervalSince1970: Double(createdOn / 1000)), encoding: .berIndefiniteLength,
            includeAlgorithmProtection: true)
        return DomainAssociationFile(pspId: pspId, createdOn: createdOn, signature: signature)
    }

    /// Why a parsed file is not one this Pay server issued for the merchant.
    public enum Problem: Sendable, Hashable {
        /// The signature does not verify to the token-signing root, its signer is not a domain-association signing
        /// leaf (the reason names the missing marker), or its signingTime is not `createdOn`.
        case signature(String)
        /// A genuine file issued for another merchant (its `pspId`).
        case otherMerchant(pspId: String)
    }

    /// Checks `file`'s signature (to the token-signing root, by a domain-association signing leaf, chain valid at
    /// its signingTime, which must be
    /// `createdOn` to the second), then that it was issued for `merchantIdentifier`. Nil when both hold.
    public func problem(with file: DomainAssociationFile, merchantIdentifier: String) -> Problem? {
        if let problem = verifier.signingProblem(
            file.signature, content: file.signedContent, signedAt: file.createdOn, field: "the file's createdOn")
        {
            guard isLegacy(file) else { return .signature(problem) }
        }
        guard file.pspId == Self.merchantHash(merchantIdentifier) else { return .otherMerchant(pspId: file.pspId) }
        return nil
    }

    /// Whether `file` is one the shared leaf of before one leaf per kind signed (``LegacySigner``): accepted, but
    /// the merchant should serve a new file.
    public func isLegacy(_ file: DomainAssociationFile) -> Bool {
        guard let legacy, Date(timeIntervalSince1970: Double(file.createdOn / 1000)) <= legacy.signer.until,
            // try?: a signature that is no CMS SignedData is no legacy file; the main check names that failure.
            case .valid(let signer, _, let signingTime) = try? legacy.verifier.verifyDetachedSignature(
                file.signature, content: file.signedContent, at: .signingTime)
        else { return false }
        return signer == legacy.signer.leaf
            && signingTime == Date(timeIntervalSince1970: Double(file.createdOn / 1000))
    }
}
