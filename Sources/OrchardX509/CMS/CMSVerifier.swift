public import Foundation
public import OrchardCrypto

/// The outcome of verifying a CMS signature. Malformed input is thrown instead (``X509Error``).
public enum CMSVerificationResult: Sendable {
    /// The signature verifies, the signer's chain leads to a trust root at the validation time and
    /// satisfies the policy. `chain` is leaf first, root last; `signingTime` is the signed attribute.
    case valid(signer: Certificate, chain: [Certificate], signingTime: Date?)
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

/// Verifies detached CMS SignedData signatures (BER or DER) from one signer with SHA-256 and
/// ECDSA P-256 or RSA PKCS#1 v1.5 — the form of Apple's payment tokens.
///
/// The fast path walks the BER in Swift without copying, finds the signer's verified chain in a cache
/// keyed by the exact certificate bytes and signer identifier, checks the messageDigest attribute
/// against SHA-256 of the content, and does one signature verification with the cached leaf key.
/// A miss parses the certificates in Swift and validates the chain with OpenSSL's `X509_verify_cert`
/// (through ``CertificateChainVerifier``). Safe to share between threads; keep one for the process.
public final class CMSVerifier: Sendable {
    /// When the signer's chain must be valid.
    public enum ValidationTime: Sendable {
        /// At the signature's own signingTime attribute (required). Pair this with a freshness check
        /// of the signing time against the current time: the signer chooses this value.
        case signingTime
        /// At a given time (e.g. `clock.now()`).
        case date(Date)
    }

    /// The trust roots, policy and chain cache used for signers.
    public let chainVerifier: CertificateChainVerifier
    /// A rule over the certificates embedded in the signature, in their order (e.g. Apple's: exactly a
    /// leaf and an intermediate). Checked when a signer is resolved; the signer cache is keyed by the exact
    /// embedded bytes, so the outcome holds for cache hits too.
    public let embeddedCertificatesPolicy: ChainPolicy
    private let signers: ExpiringCache<SignerKey, CachedSigner>
    private let rejections: RejectionCache<RefusedSignerKey>

    private struct CachedSigner: Sendable {
        let chain: VerifiedChain
        let key: CertificatePublicKey
    }

    /// The signer cache's key: the exact sid and certificate-set bytes, borrowed from the signature for a
    /// lookup (nothing copied), compacted into their own storage when inserted.
    private struct SignerKey: Hashable, Sendable {
        let identifier: ArraySlice<UInt8>
        let certificates: ArraySlice<UInt8>

        func compacted() -> SignerKey {
            SignerKey(identifier: ArraySlice(Array(identifier)), certificates: ArraySlice(Array(certificates)))
        }

        /// The sid (issuer and serial, or key identifier: what tells signers apart), the set's length and its
        /// last 32 bytes (the end of a certificate signature) rather than every byte of the set: equality
        /// still compares all of them, and colliding entries cannot be planted, because an entry exists only
        /// for certificates whose chain verified to a trust root.
        func hash(into hasher: inout Hasher) {
            identifier.withUnsafeBytes { hasher.combine(bytes: $0) }
            hasher.combine(certificates.count)
            certificates.suffix(32).withUnsafeBytes { hasher.combine(bytes: $0) }
        }

        static func == (a: SignerKey, b: SignerKey) -> Bool {
            equalBytes(a.identifier, b.identifier) && equalBytes(a.certificates, b.certificates)
        }

        private static func equalBytes(_ x: ArraySlice<UInt8>, _ y: ArraySlice<UInt8>) -> Bool {
            guard x.count == y.count else { return false }
            return x.withUnsafeBytes { p in
                y.withUnsafeBytes { q in
                    guard let a = p.baseAddress, let b = q.baseAddress else { return true }
                    return memcmp(a, b, p.count) == 0
                }
            }
        }
    }

    /// The refused signers' key: the same bytes, hashed in full. Unlike the signer cache, anyone can add entries
    /// here, so a partial hash would let them plant colliding keys and slow every lookup down.
    private struct RefusedSignerKey: Hashable, Sendable {
        let signer: SignerKey

        func hash(into hasher: inout Hasher) {
            signer.identifier.withUnsafeBytes { hasher.combine(bytes: $0) }
            signer.certificates.withUnsafeBytes { hasher.combine(bytes: $0) }
        }

        static func == (a: Self, b: Self) -> Bool { a.signer == b.signer }
    }

    /// A verifier over an existing chain verifier (sharing its trust roots, policy and chain cache).
    public init(
        chainVerifier: CertificateChainVerifier, embeddedCertificatesPolicy: ChainPolicy = .none,
        cacheCapacity: Int = 1024, clock: any WallClock = SystemClock()
    ) {
        self.chainVerifier = chainVerifier
        self.embeddedCertificatesPolicy = embeddedCertificatesPolicy
        signers = ExpiringCache(capacity: cacheCapacity, clock: clock)
        rejections = RejectionCache(capacity: cacheCapacity)
    }

    /// A verifier for signatures whose chains end in `trustRoots` and satisfy `policy` (for Apple's
    /// tokens: Apple Root CA - G3 and ``ChainPolicy/applePaymentTokenSigning``).
    public convenience init(
        trustRoots: [Certificate], policy: ChainPolicy = .none, cacheCapacity: Int = 1024,
        clock: any WallClock = SystemClock()
    ) throws(X509Error) {
        let chains = try CertificateChainVerifier(
            trustRoots: trustRoots, policy: policy, cacheCapacity: cacheCapacity, clock: clock)
        self.init(chainVerifier: chains, cacheCapacity: cacheCapacity, clock: clock)
    }

    /// How many refused signers are remembered (for tests and monitoring).
    package var rejectedSignerCount: Int { rejections.count }

    /// Verifies a detached signature over `content`.
    ///
    /// - Returns: ``CMSVerificationResult/valid(signer:chain:signingTime:)`` or the reason it is not.
    /// - Throws: ``X509Error`` only when `signature` is not a well-formed CMS SignedData.
    public func verifyDetachedSignature(
        _ signature: some DataProtocol, content: some DataProtocol, at time: ValidationTime
    ) throws(X509Error) -> CMSVerificationResult {
        try verify(Array(signature), content: Array(content), at: time)
    }

    /// ``verifyDetachedSignature(_:content:at:)`` for byte arrays, the form token verification has: a concrete
    /// body, so callers in other modules do not run it unspecialized.
    public func verifyDetachedSignature(
        _ signature: [UInt8], content: [UInt8], at time: ValidationTime
    ) throws(X509Error) -> CMSVerificationResult {
        try verify(signature, content: content, at: time)
    }

    private func verify(
        _ signature: [UInt8], content: [UInt8], at time: ValidationTime
    ) throws(X509Error) -> CMSVerificationResult {
        let view = try SignedDataView(signature[...], limits: ASN1Limits())
        try view.checkConsistency()
        guard view.content == nil else {
            return .invalid(
                VerificationFailure(.unexpectedContent, "the signature is not detached: it carries content"))
        }
        guard view.signers.count == 1, let signer = view.signers.first else {
            return .invalid(
                VerificationFailure(.signerNotFound, "expected exactly one signer, found \(view.signers.count)"))
        }
        guard signer.digestAlgorithm.is(.sha256), signer.digestAlgorithm.hasNoParameters else {
            return .invalid(
                VerificationFailure(
                    .unsupportedAlgorithm, "digest algorithm \(signer.digestAlgorithm.identifier) is not SHA-256"))
        }
        guard let signatureOID = Self.signatureAlgorithm(signer.signatureAlgorithm) else {
            return .invalid(
                VerificationFailure(
                    .unsupportedAlgorithm,
                    "signature algorithm \(signer.signatureAlgorithm.identifier) is not supported"))
        }

        // Signed attributes: content type, digest of the content, algorithm protection. RFC 5652 allows
        // a signature over id-data content without them; Orchard requires them (Apple's tokens have
        // them, and the signing time is needed for validation).
        guard let attributes = signer.attributes else {
            return .invalid(VerificationFailure(.missingAttribute, "the signature has no signed attributes"))
        }
        let signingTime = attributes.signingTime
        guard let contentType = attributes.contentType else {
            return .invalid(VerificationFailure(.missingAttribute, "the contentType attribute is missing"))
        }
        guard contentType.elementsEqual(view.contentTypeBytes) else {
            return .invalid(
                VerificationFailure(.invalidAttribute, "the contentType attribute differs from eContentType"))
        }
        guard let digest = attributes.messageDigest else {
            return .invalid(VerificationFailure(.missingAttribute, "the messageDigest attribute is missing"))
        }
        guard digest.elementsEqual(SHA256.hash(content)) else {
            return .invalid(
                VerificationFailure(.digestMismatch, "the messageDigest attribute is not SHA-256 of the content"))
        }
        if let (digestOID, signatureAlgorithm) = attributes.protectedAlgorithms {
            guard digestOID.elementsEqual(signer.digestAlgorithm.algorithm),
                signatureAlgorithm?.elementsEqual(signer.signatureAlgorithm.algorithm) ?? true
            else {
                return .invalid(
                    VerificationFailure(.invalidAttribute, "CMSAlgorithmProtection does not match the algorithms used"))
            }
        }

        let validationTime: Date
        switch time {
        case .date(let date): validationTime = date
        case .signingTime:
            guard let signingTime else {
                return .invalid(VerificationFailure(.missingAttribute, "the signingTime attribute is missing"))
            }
            validationTime = signingTime
        }

        // The signer's chain: cached by the exact certificate bytes and signer identifier.
        let key = SignerKey(identifier: signer.identifierBytes, certificates: view.certificateSetBytes)
        let cached: CachedSigner
        if let hit = signers.value(for: key, at: validationTime) {
            cached = hit
        } else {
            // A signer already refused for these exact bytes, whatever the time: refused again at the cost of a
            // lookup.
            if let refused = rejections.failure(for: RefusedSignerKey(signer: key)) { return .invalid(refused) }
            switch try resolveSigner(
                view: view, signer: signer, signedBytes: attributes.signedBytes, algorithm: signatureOID,
                at: validationTime)
            {
            case .invalid(let failure, let cacheable):
                if cacheable { rejections.insert(failure, for: RefusedSignerKey(signer: key.compacted())) }
                return .invalid(failure)
            case .resolved(let resolved):
                signers.insert(resolved, for: key.compacted(), validity: resolved.chain.validityInterval)
                // The signature was checked before the chain.
                return .valid(signer: resolved.chain.leaf, chain: resolved.chain.certificates, signingTime: signingTime)
            }
        }

        guard cached.key.isValidSignature(signer.signature, for: attributes.signedBytes, algorithm: signatureOID) else {
            return .invalid(
                VerificationFailure(.invalidSignature, "the signature does not verify with the signer's key"))
        }
        return .valid(signer: cached.chain.leaf, chain: cached.chain.certificates, signingTime: signingTime)
    }

    private enum Resolution {
        case resolved(CachedSigner)
        /// `cacheable`: the refusal follows from the signer's bytes alone (not from the time, the content or the
        /// signature over it), so the same bytes can be refused again without the work.
        case invalid(VerificationFailure, cacheable: Bool)
    }

    /// Chain failures that depend on nothing but the certificates' bytes (never on the validation time, which
    /// the signer chooses through signingTime: a real chain refused at a forged time must not stay refused).
    private static let bytesOnlyFailures: [VerificationFailure.Code] = [
        .untrustedChain, .invalidCertificateSignature, .policyViolation, .signerNotFound, .unsupportedAlgorithm,
    ]

    /// Cache miss, cheapest checks first: parse the certificates, Apple's rule on them, the signer's certificate
    /// and key, the signature with that key (before the chain: a bad signature costs one verification), then the
    /// chain.
    private func resolveSigner(
        view: SignedDataView, signer: SignerInfoView, signedBytes: [UInt8], algorithm: ASN1ObjectIdentifier,
        at time: Date
    ) throws(X509Error) -> Resolution {
        let certificates = try view.certificates.map { (c) throws(X509Error) in try Certificate(ownedDER: Array(c)) }
        let identifier = try signer.identifier()
        if let failure = embeddedCertificatesPolicy.evaluate(certificates) {
            return .invalid(failure, cacheable: true)
        }
        guard let index = certificates.firstIndex(where: { identifier.matches($0) }) else {
            return .invalid(
                VerificationFailure(.signerNotFound, "no certificate in the signature matches the signer identifier"),
                cacheable: true)
        }
        var intermediates = certificates
        let leaf = intermediates.remove(at: index)
        let leafKey: CertificatePublicKey
        do {
            leafKey = try leaf.publicKey
        } catch {
            return .invalid(
                VerificationFailure(.unsupportedAlgorithm, "the signer key: \(error.message)"), cacheable: true)
        }
        guard leafKey.isValidSignature(signer.signature, for: signedBytes, algorithm: algorithm) else {
            return .invalid(
                VerificationFailure(.invalidSignature, "the signature does not verify with the signer's key"),
                cacheable: false)
        }
        let (outcome, decidedInSwift) = chainVerifier.verifyReportingDecider(
            leaf: leaf, intermediates: intermediates, at: time)
        switch outcome {
        case .invalid(let failure):
            return .invalid(failure, cacheable: decidedInSwift && Self.bytesOnlyFailures.contains(failure.code))
        case .valid(let chain):
            return .resolved(CachedSigner(chain: chain, key: leafKey))
        }
    }

    /// The algorithm to verify with, from the SignerInfo's signatureAlgorithm (CMS producers write either
    /// the combined OID or the bare key algorithm; the digest is SHA-256 either way).
    private static func signatureAlgorithm(_ algorithm: AlgorithmView) -> ASN1ObjectIdentifier? {
        if algorithm.is(.ecdsaWithSHA256) || algorithm.is(.ecPublicKey) {
            return algorithm.parameters == nil ? .ecdsaWithSHA256 : nil
        }
        if algorithm.is(.sha256WithRSAEncryption) || algorithm.is(.rsaEncryption) {
            return algorithm.hasNoParameters ? .sha256WithRSAEncryption : nil
        }
        return nil
    }
}

/// Signers refused for reasons that hold for their exact bytes, so the same bytes are refused again without the
/// work. It cannot be poisoned: keys are the exact bytes (hashed and compared in full), only failures that follow
/// from those bytes alone are inserted, and a success is never recorded here. Bounded: the oldest entry goes first.
final class RejectionCache<Key: Hashable & Sendable>: @unchecked Sendable {
    // All mutable state is guarded by `lock`.
    private let lock = NSLock()
    private var failures: [Key: VerificationFailure] = [:]
    private var order: [Key] = []
    private var head = 0
    private let capacity: Int

    init(capacity: Int) { self.capacity = max(0, capacity) }

    var count: Int { lock.withLock { failures.count } }

    func failure(for key: Key) -> VerificationFailure? {
        guard capacity > 0 else { return nil }
        return lock.withLock { failures[key] }
    }

    func insert(_ failure: VerificationFailure, for key: Key) {
        guard capacity > 0 else { return }
        lock.withLock {
            guard failures.updateValue(failure, forKey: key) == nil else { return }
            if order.count < capacity {
                order.append(key)
            } else {
                // A ring over the insertion order: the oldest key makes room.
                failures[order[head]] = nil
                order[head] = key
                head = (head + 1) % capacity
            }
        }
    }
}
