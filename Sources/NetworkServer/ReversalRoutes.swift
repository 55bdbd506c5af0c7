import Acquirer
import AcquirerAPI
public import CardBasics
import Foundation
import Issuer
import OrchardHTTP

/// Body of `POST /v1/acquirer/reversals` (the network's reading of `AcquirerAPI.ReversalRequest`): a terminal
/// sends `terminalID` and `stan` (the authorization's), a merchant server the authorization's `idempotencyKey`; `amount` is the authorization's; `reason` says why
/// (`timeout`, `recovery`, …). The answer is ``AcquirerReversalResult``: `{"reversed", "outcome",
/// "authorizationID"?, "merchantID", "amount", "reversedAt"}`.
public struct ReversalBody: Codable, Sendable {
    public let merchantID: String
    public let terminalID: String?
    public let stan: String?
    public let idempotencyKey: String?
    public let amount: Money
    public let reason: String

    public init(
        merchantID: String, terminalID: String? = nil, stan: String? = nil, idempotencyKey: String? = nil,
        amount: Money, reason: String
    ) {
        self.merchantID = merchantID
        self.terminalID = terminalID
        self.stan = stan
        self.idempotencyKey = idempotencyKey
        self.amount = amount
        self.reason = reason
    }

    func request() throws(AcquirerError) -> AcquirerReversalRequest {
        AcquirerReversalRequest(
            origin: try .from(terminalID: terminalID, stan: stan, idempotencyKey: idempotencyKey),
            merchantID: merchantID, amount: amount, reason: reason)
    }
}

extension NetworkRoutes {
    /// `POST /v1/acquirer/reversals` (callers of the acquiring group): ``ReversalBody`` →
    /// ``AcquirerReversalResult``, idempotent per terminal ID + STAN or merchant key.
    static func installReversals(into router: inout Router, acquirer: Acquirer) {
        router.classify(AcquirerAPI.Declared.reversals, as: .payment)
        router.add(AcquirerAPI.Declared.reversals) { (body: ReversalBody, _) in
            try await acquirer.reverse(try body.request())
        }
    }
}
