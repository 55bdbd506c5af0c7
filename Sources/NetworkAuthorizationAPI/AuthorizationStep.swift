/// The durable steps of one authorization inside the network, in order. Each is a point after which a crash
/// leaves state a retry of the same request resumes from, so the retry gets the first answer and the issuer
/// holds the money once (docs/network.md, "Exactly once").
///
/// - ``counterRecorded``: the token service recorded the cryptogram's ATC and, in the same transaction, the
///   authorization as started (with its request fingerprint). A retry skips the counter check it would now
///   fail (the counter is its own) and asks the issuer.
/// - ``issuerAnswered``: the issuer decided and, in one transaction, recorded its answer and moved the balance.
///   Asked again with the same network transaction ID, it returns that answer and moves nothing.
/// - ``networkAnswerRecorded``: the token service replaced the started record with the final answer; a retry
///   gets it without asking anyone.
/// - ``acquirerAnswerRecorded``: the acquirer recorded its result under the caller's idempotency key; the next
///   thing is the reply. A retry gets the recorded result.
public enum AuthorizationStep: String, Hashable, Sendable, Codable, CaseIterable, CustomStringConvertible {
    case counterRecorded
    case issuerAnswered
    case networkAnswerRecorded
    case acquirerAnswerRecorded

    public var description: String { rawValue }
}

/// Told when an authorization passes an ``AuthorizationStep``: the seam crash tests kill the process at. A
/// deployment runs without one. Called on the authorization's own task, after the step is durable and before
/// the next begins; it must not throw or change the authorization.
public protocol AuthorizationProbe: Sendable {
    /// `transactionID` is the acquirer's network transaction ID (no card data).
    func reached(_ step: AuthorizationStep, transactionID: String) async
}
