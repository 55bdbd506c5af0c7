public import Foundation
public import OrchardCrypto
import OrchardHTTP
public import OrchardStore
public import OrchardX509
public import PaymentToken
public import WebMerchantAPI

/// Capability statements for `canMakePaymentsWithActiveCard` (docs/web.md): whether a merchant has a domain
/// validated, signed by the capability-statement signing leaf (``SigningLeaves``), valid 5 minutes. Asked without any device identity.
///
/// Each question looks the (merchant, domain) pair up first (one primary-key read), then:
/// - a validated pair is answered from the positive cache while its statement has a minute left, else signed
///   from the shared signing budget (a token bucket, on the monotonic clock);
/// - any other pair (unknown merchant, unregistered, failed or lapsed domain) gets `validated` 0, the same
///   answer for each, from the negative cache, else signed from a small budget per client (its network:
///   ``clientKey(_:)``) and a ceiling over all clients, never from the shared budget.
///
/// Both caches are LRU with a fixed capacity, and apart: questions about unvalidated pairs fill only the negative
/// one, so they can neither drain the budget validated pairs are signed from nor evict their statements. A
/// question over its budget is refused (``RateLimited``).
public final class CapabilityStatements: @unchecked Sendable {
    private let store: Store
    private let tokenSigning: TokenSigningPKI
    private let clock: any WallClock
    private let signingBudget: TokenBucket
    private let clientBudget: RateLimiter
    private let negativeBudget: TokenBucket
    // Guarded by `lock`.
    private let lock = NSLock()
    private var positive: LRUCache<Pair, CapabilityStatement>
    private var negative: LRUCache<Pair, CapabilityStatement>

    private struct Pair: Hashable {
        let merchantIdentifier: String
        let domain: String
    }

    /// How much signing the route may do, and how many statements it keeps.
    public struct Budgets: Sendable {
        /// New statements for validated pairs per second on average, shared by every client.
        public var rate: Double = 50
        /// New statements for validated pairs at once.
        public var burst: Double = 100
        /// New statements for any other pair per second, per client network (``clientKey(_:)``).
        public var clientRate: Double = 1
        /// New statements for any other pair at once, per client network.
        public var clientBurst: Int = 10
        /// New statements for any other pair per second, all client networks together.
        public var negativeRate: Double = 20
        /// New statements for any other pair at once, all client networks together.
        public var negativeBurst: Double = 40
        /// Statements kept for validated pairs (LRU).
        public var positiveCapacity = 10_000
        /// Statements kept for any other pair (LRU, apart from the validated ones).
        public var negativeCapacity = 2_048

        /// The defaults above.
        public init() {}
    }

    public init(
        store: Store, tokenSigning: TokenSigningPKI, clock: any WallClock, monotonic: any MonotonicClock,
        budgets: Budgets = Budgets()
    ) {
        self.store = store
        self.tokenSigning = tokenSigning
        self.clock = clock
        signingBudget = TokenBucket(rate: budgets.rate, burst: budgets.burst, clock: monotonic)
        clientBudget = RateLimiter(
            RateLimit(perSecond: budgets.clientRate, burst: budgets.clientBurst), clock: monotonic, maxKeys: 4_096)
        negativeBudget = TokenBucket(rate: budgets.negativeRate, burst: budgets.negativeBurst, clock: monotonic)
        positive = LRUCache(capacity: budgets.positiveCapacity)
        negative = LRUCache(capacity: budgets.negativeCapacity)
    }

    /// Over the limit: ask again after a moment.
    public struct RateLimited: Error, Sendable {}

    /// The statement for `merchantIdentifier` (plain ID) and `domain`, asked by a client at `client` (the
    /// connection's peer address; only its network counts, and it is kept nowhere but in the budget): a kept one
    /// while it has a minute left, else a new signature if the pair's budget allows; ``RateLimited`` otherwise.
    /// An unknown merchant or a domain that is not validated gets `validated` 0 (the same answer, so the route
    /// tells nothing more).
    public func statement(
        merchantIdentifier: String, domain: String, client: String
    ) async throws -> CapabilityStatement {
        let domain = domain.lowercased()
        guard MerchantSession.isPlainString(domain), MerchantSession.isPlainString(merchantIdentifier) else {
            throw PayServerError(.invalidRequest, "give a merchant ID and the top-level page's domain")
        }
        let now = clock.now()
        let key = Pair(merchantIdentifier: merchantIdentifier, domain: domain)
        let validated = try await store.read { db in
            try WebDomains.isValidated(db, merchantIdentifier: merchantIdentifier, domain: domain, now: now)
        }
        let kept = lock.withLock { validated ? positive.value(for: key) : negative.value(for: key) }
        if let kept, kept.expiresAt - now.orchardMilliseconds > 60_000 { return kept }
        if validated {
            guard signingBudget.take() else { throw RateLimited() }
        } else {
            // The client's own budget first, so one client cannot use up the ceiling all share.
            guard clientBudget.take(Self.clientKey(client)) == nil, negativeBudget.take() else { throw RateLimited() }
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
            if validated { positive.set(statement, for: key) } else { negative.set(statement, for: key) }
        }
        return statement
    }

    /// A verifier of statement signatures to `root` (the token-signing root) by a capability-statement signing
    /// leaf: a leaf of another kind is refused (``OrchardX509/ChainPolicy/signingLeaf(_:)``).
    public static func verifier(root: Certificate, clock: any WallClock) throws(X509Error) -> CMSVerifier {
        try CMSVerifier(
            trustRoots: [root], policy: .signingLeaf(.capabilityStatement), cacheCapacity: 16, clock: clock)
    }

    /// The key of `address`'s budget: its network, so a client rotating addresses within it counts once. Every
    /// loopback address is one key, an IPv4 address counts by its /24, an IPv6 address by its /64 (an
    /// IPv4-mapped one as IPv4), anything else (no address) as one key.
    public static func clientKey(_ address: String) -> String {
        func ipv4(_ bytes: some Collection<UInt8>) -> String {
            let octets = Array(bytes)
            return octets[0] == 127 ? "loopback" : "v4:\(octets[0]).\(octets[1]).\(octets[2])"
        }
        var v4 = in_addr()
        if inet_pton(AF_INET, address, &v4) == 1 {
            return ipv4(withUnsafeBytes(of: &v4) { Array($0) })
        }
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, address, &v6) == 1 else { return "other" }
        let bytes = withUnsafeBytes(of: &v6) { Array($0) }
        if bytes[..<15].allSatisfy({ $0 == 0 }) && bytes[15] == 1 { return "loopback" }
        if bytes[..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xFF && bytes[11] == 0xFF { return ipv4(bytes[12...]) }
        return "v6:" + Hex.encode(Array(bytes[..<8]))
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
                    merchantIdentifier: body.merchantIdentifier, domain: body.domain, client: request.remoteAddress)
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
