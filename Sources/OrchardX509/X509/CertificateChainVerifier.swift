public import Foundation
public import OrchardCrypto

/// Verifies certificate chains to a fixed set of trust roots (purpose ANY, at a given time), applies a
/// ``ChainPolicy``, and caches the chains that verified. The path is validated in Swift over the parsed
/// certificates with OpenSSL checking each signature (cheap checks first, no `d2i_X509`); chains that use what
/// that validator does not check (name or policy constraints) go to OpenSSL's `X509_verify_cert` once their
/// signatures have verified.
///
/// The cache is keyed by the exact DER bytes of the leaf and intermediates. A cached chain is reused
/// for any validation time inside its ``VerifiedChain/validityInterval`` (signatures do not depend on
/// time), and is dropped once the injected wall clock passes the chain's earliest notAfter, or when the
/// cache is full (the oldest entry goes first). Rejections are not cached. Safe to share between threads.
public final class CertificateChainVerifier: Sendable {
    /// The only anchors a verified chain may end in.
    public let trustRoots: [Certificate]
    /// The rules applied after OpenSSL accepts a chain.
    public let policy: ChainPolicy
    private let store: OpenSSLTrustStore
    /// The self-issued trust roots (a path ends in one of them) and the others (CAs a path may go through).
    private let anchors: [TrustAnchor]
    private let trustedIntermediates: [Certificate]
    private let cache: ExpiringCache<ChainKey, VerifiedChain>

    /// - Parameters:
    ///   - trustRoots: the only anchors a chain may end in.
    ///   - cacheCapacity: the most chains kept; 0 disables the cache.
    ///   - clock: the wall clock that expires cache entries.
    public init(
        trustRoots: [Certificate], policy: ChainPolicy = .none, cacheCapacity: Int = 1024,
        clock: any WallClock = SystemClock()
    ) throws(X509Error) {
        guard !trustRoots.isEmpty else {
            throw X509Error(.invalidValue, "a chain verifier needs at least one trust root")
        }
        self.trustRoots = trustRoots
        self.policy = policy
        store = try OpenSSLTrustStore(roots: trustRoots)
        anchors = trustRoots.filter(\.isSelfIssued).map(TrustAnchor.init)
        trustedIntermediates = trustRoots.filter { !$0.isSelfIssued }
        cache = ExpiringCache(capacity: cacheCapacity, clock: clock)
    }

    /// Verifies that `leaf` chains to a trust root through (some of) `intermediates` at `time`, then
    /// applies the policy. Uses and fills the cache.
    public func verify(leaf: Certificate, intermediates: [Certificate] = [], at time: Date) -> ChainVerificationResult {
        verifyReportingDecider(leaf: leaf, intermediates: intermediates, at: time).result
    }

    /// ``verify(leaf:intermediates:at:)``, and whether Swift's path validation decided it (its refusals of
    /// untrusted chains, certificate signatures, policies and algorithms follow from the bytes alone) rather than
    /// OpenSSL's fallback (whose choice among candidate issuers can depend on the time).
    func verifyReportingDecider(
        leaf: Certificate, intermediates: [Certificate], at time: Date
    ) -> (result: ChainVerificationResult, decidedInSwift: Bool) {
        guard cache.isEnabled else {
            return verifyUncachedReportingDecider(leaf: leaf, intermediates: intermediates, at: time)
        }
        let key = ChainKey(
            leaf: leaf.derRepresentation[...], intermediates: intermediates.map { $0.derRepresentation[...] })
        if let chain = cache.value(for: key, at: time) { return (.valid(chain), true) }
        let outcome = verifyUncachedReportingDecider(leaf: leaf, intermediates: intermediates, at: time)
        if case .valid(let chain) = outcome.result { cache.insert(chain, for: key, validity: chain.validityInterval) }
        return outcome
    }

    /// The cached chain for these exact bytes, if one is cached and usable at `time`.
    func cachedChain(for key: ChainKey, at time: Date) -> VerifiedChain? { cache.value(for: key, at: time) }

    func insert(_ chain: VerifiedChain, for key: ChainKey) {
        cache.insert(chain, for: key, validity: chain.validityInterval)
    }

    /// Verifies without looking at or filling the cache (for benchmarks and tests).
    package func verifyUncached(
        leaf: Certificate, intermediates: [Certificate], at time: Date
    ) -> ChainVerificationResult {
        verifyUncachedReportingDecider(leaf: leaf, intermediates: intermediates, at: time).result
    }

    private func verifyUncachedReportingDecider(
        leaf: Certificate, intermediates: [Certificate], at time: Date
    ) -> (result: ChainVerificationResult, decidedInSwift: Bool) {
        switch PathValidation.validate(
            leaf: leaf, intermediates: intermediates, anchors: anchors, trustedIntermediates: trustedIntermediates,
            at: time)
        {
        case .invalid(let failure): return (.invalid(failure), true)
        case .valid(let chain): return (finish(chain, leaf: leaf), true)
        case .needsOpenSSL: return (verifyWithOpenSSL(leaf: leaf, intermediates: intermediates, at: time), false)
        }
    }

    /// Verifies with OpenSSL's `X509_verify_cert` alone, without the cache (the reference the Swift path
    /// validation is tested against, and its fallback).
    package func verifyWithOpenSSL(
        leaf: Certificate, intermediates: [Certificate], at time: Date
    ) -> ChainVerificationResult {
        let handles: (OpenSSLCertificate, [OpenSSLCertificate])
        do {
            handles = (
                try OpenSSLCertificate(der: leaf.derRepresentation),
                try intermediates.map { (c) throws(X509Error) in try OpenSSLCertificate(der: c.derRepresentation) }
            )
        } catch {
            return .invalid(VerificationFailure(.invalidChain, error.message))
        }
        switch store.verify(leaf: handles.0, intermediates: handles.1, at: time) {
        case .rejected(let failure):
            return .invalid(failure)
        case .built(let ders):
            var known: [[UInt8]: Certificate] = [:]
            for c in [leaf] + intermediates + trustRoots { known[c.derRepresentation] = c }
            var chain: [Certificate] = []
            for der in ders {
                if let c = known[der] {
                    chain.append(c)
                } else if let c = try? Certificate(derEncoded: der) {
                    chain.append(c)
                } else {
                    return .invalid(
                        VerificationFailure(
                            .invalidChain, "OpenSSL built a chain with a certificate Swift cannot parse"))
                }
            }
            guard !chain.isEmpty else {
                return .invalid(VerificationFailure(.invalidChain, "OpenSSL returned an empty chain"))
            }
            return finish(chain, leaf: leaf)
        }
    }

    /// The policy and the validity interval of a chain that verified.
    private func finish(_ chain: [Certificate], leaf: Certificate) -> ChainVerificationResult {
        if let failure = policy.evaluate(chain) { return .invalid(failure) }
        let start = chain.map(\.notValidBefore).max() ?? leaf.notValidBefore
        let end = chain.map(\.notValidAfter).min() ?? leaf.notValidAfter
        guard start <= end else {
            return .invalid(VerificationFailure(.invalidChain, "the chain's validity periods do not overlap"))
        }
        return .valid(VerifiedChain(certificates: chain, validityInterval: start...end))
    }

    /// How many chains the cache holds (for tests and monitoring).
    public var cachedChainCount: Int { cache.count }
}

/// The exact bytes of a leaf and its intermediates, hashed as one buffer.
struct ChainKey: Hashable, Sendable {
    let bytes: [UInt8]

    init(leaf: ArraySlice<UInt8>, intermediates: [ArraySlice<UInt8>]) {
        var out: [UInt8] = []
        out.reserveCapacity(leaf.count + intermediates.reduce(0) { $0 + $1.count } + 4 * (intermediates.count + 1))
        func append(_ part: ArraySlice<UInt8>) {
            withUnsafeBytes(of: UInt32(part.count).bigEndian) { out.append(contentsOf: $0) }
            out.append(contentsOf: part)
        }
        append(leaf)
        for part in intermediates { append(part) }
        bytes = out
    }

    func hash(into hasher: inout Hasher) {
        bytes.withUnsafeBytes { hasher.combine(bytes: $0) }
    }

    static func == (a: Self, b: Self) -> Bool {
        guard a.bytes.count == b.bytes.count else { return false }
        return a.bytes.withUnsafeBytes { x in
            b.bytes.withUnsafeBytes { y in
                guard let p = x.baseAddress, let q = y.baseAddress else { return x.count == y.count }
                return memcmp(p, q, x.count) == 0
            }
        }
    }
}

/// A thread-safe map whose entries are usable inside a validity interval and expire with the wall clock.
final class ExpiringCache<Key: Hashable & Sendable, Value: Sendable>: @unchecked Sendable {
    private struct Entry {
        let value: Value
        let validity: ClosedRange<Date>
        let serial: UInt64
    }

    // All mutable state is guarded by `lock`.
    private let lock = NSLock()
    private var entries: [Key: Entry] = [:]
    private var nextSerial: UInt64 = 0
    private let capacity: Int
    private let clock: any WallClock

    init(capacity: Int, clock: any WallClock) {
        self.capacity = max(0, capacity)
        self.clock = clock
    }

    var count: Int { lock.withLock { entries.count } }

    /// Whether entries are kept at all (a capacity of 0 keeps none: no key need be built).
    var isEnabled: Bool { capacity > 0 }

    func value(for key: Key, at time: Date) -> Value? {
        let now = clock.now()
        return lock.withLock {
            guard let entry = entries[key] else { return nil }
            if entry.validity.upperBound < now {
                entries[key] = nil
                return nil
            }
            return entry.validity.contains(time) ? entry.value : nil
        }
    }

    func insert(_ value: Value, for key: Key, validity: ClosedRange<Date>) {
        guard capacity > 0 else { return }
        let now = clock.now()
        guard validity.upperBound >= now else { return }
        lock.withLock {
            if entries[key] == nil && entries.count >= capacity {
                entries = entries.filter { $0.value.validity.upperBound >= now }
                if entries.count >= capacity, let oldest = entries.min(by: { $0.value.serial < $1.value.serial }) {
                    entries[oldest.key] = nil
                }
            }
            nextSerial += 1
            entries[key] = Entry(value: value, validity: validity, serial: nextSerial)
        }
    }
}
