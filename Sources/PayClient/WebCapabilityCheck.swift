import Foundation
public import OrchardCrypto
public import OrchardHTTP
public import OrchardX509
public import WebMerchantAPI

/// The device's side of `canMakePaymentsWithActiveCard` (docs/web.md, "Capability statements"): asks the Pay
/// server whether a merchant has the top-level page's domain validated, **without any client certificate** (the
/// Pay server must not learn which device visits which site), and believes the answer only when the statement is
/// signed under the token-signing root (`pki/pay/token-root.pem`) by a capability-statement signing leaf (a leaf of
/// another kind is refused) at its `issuedAt`, is current, and names this merchant and this domain. The wallet's
/// ``Wallet/Wallet/answer(_:verifyMerchantSession:)`` takes it as its check.
public struct WebCapabilityCheck: Sendable {
    private let client: HTTPClient
    private let baseURL: String
    private let verifier: CMSVerifier
    private let clock: any WallClock

    /// `client` must present no client certificate; `baseURL` is the Pay server's public side
    /// (`https://pay.orchard.test`); `tokenRoot` the token-signing root.
    public init(client: HTTPClient, baseURL: String, tokenRoot: Certificate, clock: any WallClock) throws(X509Error) {
        self.client = client
        self.baseURL = baseURL
        self.clock = clock
        verifier = try CMSVerifier(
            trustRoots: [tokenRoot], policy: .signingLeaf(.capabilityStatement), cacheCapacity: 16, clock: clock)
    }

    /// Whether the Pay server states, verifiably, that `merchantIdentifier` has `domain` validated. Any answer
    /// that is not such a statement (refused, unsigned, stale, for another merchant or domain) is false.
    public func isValidated(merchantIdentifier: String, domain: String) async throws -> Bool {
        let request = try HTTPClientRequest.json(
            .post, baseURL + WebMerchantAPI.Capability.path,
            CapabilityRequest(merchantIdentifier: merchantIdentifier, domain: domain))
        let answer = try await client.send(request)
        guard answer.status == .ok, let statement = try? CapabilityStatement(json: Array(answer.body)) else {
            return false
        }
        return accepts(statement, merchantIdentifier: merchantIdentifier, domain: domain)
    }

    /// The checks of ``isValidated(merchantIdentifier:domain:)`` on a statement already received.
    public func accepts(_ statement: CapabilityStatement, merchantIdentifier: String, domain: String) -> Bool {
        problem(with: statement, merchantIdentifier: merchantIdentifier, domain: domain) == nil
    }

    /// Why ``accepts(_:merchantIdentifier:domain:)`` refuses `statement`, or nil when it accepts it; a statement
    /// signed by a leaf of another kind is refused with the reason naming the capability-statement marker it lacks.
    public func problem(with statement: CapabilityStatement, merchantIdentifier: String, domain: String) -> String? {
        let nowMS = Int64((clock.now().timeIntervalSince1970 * 1000).rounded(.down))
        guard statement.validated else { return "the statement says the domain is not validated" }
        guard statement.domain == domain.lowercased(),
            statement.merchantIdentifier == Hex.encode(SHA256.hash(Array(merchantIdentifier.utf8))).uppercased()
        else { return "the statement is for another merchant or domain" }
        guard nowMS >= statement.issuedAt - 60_000, nowMS <= statement.expiresAt else {
            return "the statement is not current"
        }
        return verifier.signingProblem(
            statement.signature, content: statement.signedContent, signedAt: statement.issuedAt, field: "its issuedAt",
            signed: "the statement")
    }
}
