public import CardBasics
public import Foundation
public import Issuer
import NetworkAuthorizationAPI
import OrchardCrypto

/// A reversal as the token service reads the acquirer's ``NetworkAuthorizationAPI/ReversalRequest``: cancel the
/// authorization it sent with this transaction ID.
public struct NetworkReversalRequest: Hashable, Sendable, Codable {
    public let acquirerID: String
    /// The ``NetworkAuthorizationRequest/transactionID`` of the authorization to cancel.
    public let transactionID: String
    /// The authorization's amount.
    public let amount: Money
    public let transmittedAt: Date

    public init(acquirerID: String, transactionID: String, amount: Money, transmittedAt: Date) {
        self.acquirerID = acquirerID
        self.transactionID = transactionID
        self.amount = amount
        self.transmittedAt = transmittedAt
    }
}

/// The network's answer to a reversal.
public struct NetworkReversalResponse: Hashable, Sendable, Codable {
    public let transactionID: String
    public let outcome: ReversalOutcome

    public init(transactionID: String, outcome: ReversalOutcome) {
        self.transactionID = transactionID
        self.outcome = outcome
    }
}

extension NetworkDeclineReason {
    /// The authorization arrived after its own reversal (response code `12`).
    public static let reversedBeforeAuthorization = NetworkDeclineReason(
        rawValue: NetworkAuthorizationAPI.reversedBeforeAuthorization)
}

extension TokenService {
    /// The idempotency scope of an acquirer's reversals (beside `authorization:<acquirer>`).
    static func reversalScope(_ acquirerID: String) -> String { "reversal:" + acquirerID }

    /// Whether a reversal for this acquirer transaction was recorded first. Called by ``authorize(_:)`` while
    /// it holds the transaction's key, so an authorization and its reversal never interleave.
    func reversalRecorded(acquirerID: String, transactionID: String) async throws -> Bool {
        try await vault.idempotencyRecord(scope: Self.reversalScope(acquirerID), key: transactionID) != nil
    }

    /// Reverses an authorization: serialized with the authorization of the same acquirer transaction, recorded
    /// once (a repeat gets the first answer), and forwarded to the issuer, whose ledger decides whether money
    /// moves (``ReversalOutcome``).
    ///
    /// With the network's answer on record and the token found, the reversal goes to that token's issuer; an
    /// answer the network declined itself reports `notApproved`. Without a record (the authorization never
    /// arrived, or the network stopped between the issuer's answer and its own record) the network does not
    /// know the card, so it sends the reversal to every issuer it routes to: the one that approved releases
    /// the funds, the others only block the transaction ID. Either way an authorization that arrives later is
    /// declined with `12` (`reversedBeforeAuthorization`) before any check.
    public func reverse(_ request: NetworkReversalRequest) async throws -> NetworkReversalResponse {
        let key = request.transactionID
        guard (1...200).contains(key.utf8.count), (1...64).contains(request.acquirerID.utf8.count) else {
            throw TokenServiceError(.invalidRequest, "a transaction ID is 1 to 200 bytes, an acquirer ID 1 to 64")
        }
        let authorizationScope = "authorization:" + request.acquirerID
        // The same serializer key as `idempotent(scope:key:…)` takes for the authorization.
        await serializer.acquire(authorizationScope + "\u{0}" + key)
        defer { serializer.release(authorizationScope + "\u{0}" + key) }
        return try await reverseHoldingKey(request)
    }

    /// The body of ``reverse(_:)``, for a caller that holds the transaction's serializer key.
    func reverseHoldingKey(_ request: NetworkReversalRequest) async throws -> NetworkReversalResponse {
        let key = request.transactionID
        let authorizationScope = "authorization:" + request.acquirerID
        let scope = Self.reversalScope(request.acquirerID)
        let fingerprint = Self.fingerprint([
            Array(String(request.amount.minorUnits).utf8), Array(request.amount.currency.numericString.utf8),
        ])
        if let stored = try await vault.idempotencyRecord(scope: scope, key: key) {
            guard stored.requestFingerprint == fingerprint else {
                throw TokenServiceError(.idempotencyConflict, "this transaction was reversed with another amount")
            }
            do {
                return try JSONDecoder().decode(NetworkReversalResponse.self, from: Data(stored.response))
            } catch {
                throw TokenServiceError(.storeFailure, "a stored reversal could not be decoded")
            }
        }
        var authorization: NetworkAuthorizationResponse?
        var token: TokenRecord?
        if let record = try await vault.idempotencyRecord(scope: authorizationScope, key: key) {
            if let started = record.started {
                // Started without a final answer: the token is known, the issuer's answer is not.
                token = try await vault.token(reference: started.tokenReference)
            } else {
                // try?: a stored answer that does not decode names no token: every issuer is asked (below).
                authorization = try? JSONDecoder().decode(
                    NetworkAuthorizationResponse.self, from: Data(record.response))
                if let authorization { token = try await vault.token(dpan: authorization.pan) }
            }
        }
        var targets = Array(issuers.values).sorted { $0.issuerID < $1.issuerID }
        if let token, let route = issuers[token.issuerID] { targets = [route] }
        let issuerRequest = IssuerReversalRequest(
            networkTransactionID: request.acquirerID + ":" + key, amount: request.amount,
            transmittedAt: request.transmittedAt)
        var outcome = ReversalOutcome.preempted
        for route in targets {
            let answer: IssuerReversalResponse
            do {
                answer = try await route.host.reverse(issuerRequest)
            } catch let error as IssuerError where error.code == .invalidInput {
                throw TokenServiceError(.invalidRequest, "the issuer refused the reversal: \(error.message)")
            } catch {
                throw TokenServiceError(.issuerUnavailable, "the issuer did not take the reversal; retry")
            }
            if answer.outcome == .released || (answer.outcome == .notApproved && outcome == .preempted) {
                outcome = answer.outcome
            }
        }
        if let authorization, !authorization.responseCode.isApproved, outcome != .released {
            outcome = .notApproved
        }
        let response = NetworkReversalResponse(transactionID: key, outcome: outcome)
        try await saveAnswer(response, scope: scope, key: key, fingerprint: fingerprint)
        return response
    }
}
