public import Foundation
public import OrchardCrypto
import OrchardHTTP
public import OrchardStore
public import OrchardX509
public import PaymentToken
public import WebMerchantAPI

/// Capability statements for `canMakePaymentsWithActiveCard` (docs/web.md): whether a merchant has a domain
/// validated, signed by the capability-statement signing leaf (``SigningLeaves``), valid 5 minutes. Asked without any device identity; the answer
/// for a merchant and domain is kept until it has a minute left, so repeated questions cost no signature; new
/// signatures are rate-limited (a token bucket, on the monotonic clock), and a request over the limit is refused.
public final class CapabilityStatements: @unchecked Sendable {
    private let store: Store
    private let tokenSigning: TokenSigningPKI
    private let clock: any WallClock
    private let limiter: TokenBucket
    // Guarded by `lock`.
    private let lock = NSLock()
    private var cache: [String: CapabilityStatement] = [:]

    /// `rate` signatures per second on average, `burst` at once.
    public init(
        store: Store, tokenSigning: TokenSigningPKI, clock: any WallClock, monotonic: any MonotonicClock,
        rate: Double = 50, burst: Double = 100
    ) {
        self.store = store
        self.tokenSigning = tokenSigning
        self.clock = clock
        limiter = TokenBucket(rate: rate, burst: burst, clock: monotonic)
    }

    /// Over the limit: ask again after a moment.
    public struct RateLimited: Error, Sendable {}

    /// The statement for `merchantIdentifier` (plain ID) and `domain`: a kept one while it has a minute left,
    /// else a new signature if the limiter allows; ``RateLimited`` otherwise. An unknown merchant or a domain that
    /// is not validated gets `validated` 0 (the same answer, so the route tells nothing more).
    public func statement(merchantIdentifier: String, domain: String) async throws -> CapabilityStatement {
        let domain = domain.lowercased()
        guard MerchantSession.isPlainString(domain), MerchantSession.isPlainString(merchantIdentifier) else {
            throw PayServerError(.invalidRequest, "give a merchant ID and the top-level page's domain")
        }
        let now = clock.now()
        let key = merchantIdentifier + " " + domain
        if let kept = lock.withLock({ cache[key] }), kept.expiresAt - now.orchardMilliseconds > 60_000 {
            return kept
        }
        guard limiter.take() else { throw RateLimited() }
        let validated = try await store.read { db in
            try db.queryFirst(
                "SELECT 1 FROM merchant_domains WHERE merchant_identifier = ? AND domain = ? AND expires_at > ?",
                [.text(merchantIdentifier), .text(domain), .milliseconds(now)], { _ in true }) != nil
        }
        let issuedAt = now.orchardMilliseconds
        let hash = AssociationFiles.merchantHash(merchantIdentifier)
        let unsigned = CapabilityStatement(
            domain: domain, merchantIdentifier: hash, issuedAt: issuedAt, validated: validated, signature: [])
        let signature = try CMS.signDetached(
            unsigned.signedContent, signer: tokenSigning.leaf, key: tokenSigning.leafKey,
            certificates: [tokenSigning.leaf, tokenSigning.intermediate],
            signingTime: Date(timeIntervalSince1970: Double(issuedAt / 1000)), encoding: .berIndefiniteLength,
            includeAlgorithmProtection: true)
        let statement = CapabilityStatement(
            domain: domain, merchantIdentifier: hash, issuedAt: issuedAt, validated: validated, signature: signature)
        lock.withLock {
            if cache.count >= 10_000 { cache.removeAll() }
            cache[key] = statement
        }
        return statement
    }

    /// A verifier of statement signatures to `root` (the token-signing root) by a capability-statement signing
    /// leaf: a leaf of another kind is refused (``OrchardX509/ChainPolicy/signingLeaf(_:)``).
    public static func verifier(root: Certificate, clock: any WallClock) throws(X509Error) -> CMSVerifier {
        try CMSVerifier(
            trustRoots: [root], policy: .signingLeaf(.capabilityStatement), cacheCapacity: 16, clock: clock)
    }

    /// Checks a statement's signature (to the token-signing root, by a capability-statement signing leaf with
    /// `verifier` from ``verifier(root:clock:)``, signingTime = `issuedAt`) and that it is current at `now`: nil
    /// when it holds.
    public static func problem(with statement: CapabilityStatement, verifier: CMSVerifier, now: Date) -> String? {
        if let problem = verifier.signingProblem(
            statement.signature, content: statement.signedContent, signedAt: statement.issuedAt,
            field: "the statement's issuedAt")
        {
            return problem
        }
        let nowMS = now.orchardMilliseconds
        guard nowMS >= statement.issuedAt - 60_000, nowMS <= statement.expiresAt else {
            return "the statement is not current"
        }
        return nil
    }
}

/// A token bucket on a monotonic clock: `burst` tokens, refilled at `rate` per second.
final class TokenBucket: @unchecked Sendable {
    private struct State {
        var tokens: Double
        var last: UInt64
    }
    private let rate: Double
    private let burst: Double
    private let clock: any MonotonicClock
    // Guarded by `lock`.
    private let lock = NSLock()
    private var state: State

    init(rate: Double, burst: Double, clock: any MonotonicClock) {
        self.rate = rate
        self.burst = burst
        self.clock = clock
        state = State(tokens: burst, last: clock.nanoseconds())
    }

    /// Takes one token if there is one.
    func take() -> Bool {
        let now = clock.nanoseconds()
        return lock.withLock {
            let elapsed = Double(now &- state.last) / 1_000_000_000
            state.tokens = min(burst, state.tokens + elapsed * rate)
            state.last = now
            guard state.tokens >= 1 else { return false }
            state.tokens -= 1
            return true
        }
    }
}

extension PayServer {
    /// `POST /v1/web/capability` at `pay.orchard.test`: no client certificate read, no caller logged.
    func installCapabilityRoute(into router: inout Router) {
        let statements = self.capabilities
        router.add(WebMerchantAPI.Capability.declared) { request in
            let body = try Self.capabilityInput(request)
            do {
                let statement = try await statements.statement(
                    merchantIdentifier: body.merchantIdentifier, domain: body.domain)
                return HTTPResponse(
                    status: .ok, headers: ["Content-Type": "application/json"], body: Data(statement.json))
            } catch is CapabilityStatements.RateLimited {
                var response = try HTTPResponse.json(
                    ["error": ["code": "rateLimited", "message": "too many capability questions: ask again shortly"]],
                    status: .tooManyRequests)
                response.headers.set("Retry-After", "1")
                return response
            }
        }
    }

    static func capabilityInput(_ request: HTTPRequest) throws -> CapabilityRequest {
        try request.decodeJSON(CapabilityRequest.self)
    }
}
