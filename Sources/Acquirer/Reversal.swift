public import CardBasics
public import Foundation
public import Issuer
import NetworkAuthorizationAPI
import OrchardCrypto

/// A reversal from a terminal (terminal ID + STAN of the authorization) or a merchant server (the
/// authorization's idempotency key): cancel an authorization whose answer never arrived or is not wanted.
public struct AcquirerReversalRequest: Hashable, Sendable {
    /// The same origin, and so the same idempotency key, as the authorization it reverses.
    public let origin: AcquirerAuthorizationRequest.Origin
    public let merchantID: String
    /// The authorization's amount (a full reversal; another amount is refused).
    public let amount: Money
    /// Why: `timeout`, `recovery`, `cancelled`, … (1 to 32 letters, digits, `-` or `_`).
    public let reason: String

    public init(origin: AcquirerAuthorizationRequest.Origin, merchantID: String, amount: Money, reason: String) {
        self.origin = origin
        self.merchantID = merchantID
        self.amount = amount
        self.reason = reason
    }
}

/// The acquirer's answer to a reversal, as it returns and keeps it (no card number).
public struct AcquirerReversalResult: Hashable, Sendable, Codable {
    /// Whether an approved authorization was cancelled and its funds released.
    public let reversed: Bool
    public let outcome: ReversalOutcome
    /// The acquirer's reference of the reversed authorization, when the acquirer had recorded it.
    public let authorizationID: String?
    public let merchantID: String
    public let amount: Money
    public let reversedAt: Date
}

/// What the acquirer stores per reversal: the key it shares with the authorization, a fingerprint of the
/// request, the reason and the result.
public struct AcquirerReversalRecord: Hashable, Sendable, Codable {
    public let idempotencyKey: String
    /// SHA-256 over merchant ID, amount and currency, hex.
    public let requestFingerprint: String
    public let reason: String
    public let result: AcquirerReversalResult

    public init(idempotencyKey: String, requestFingerprint: String, reason: String, result: AcquirerReversalResult) {
        self.idempotencyKey = idempotencyKey
        self.requestFingerprint = requestFingerprint
        self.reason = reason
        self.result = result
    }
}

extension Acquirer {
    /// Reverses the authorization with the request's idempotency key (terminal ID + STAN, or the merchant's
    /// key), once: a repeat gets the first result.
    ///
    /// Serialized with the authorization of the same key. The reversal always goes on to the network (the
    /// acquirer may have stopped between the network's answer and its own record), which forwards it to the
    /// issuer; the issuer's ledger decides (``ReversalOutcome``): an approved authorization is released exactly
    /// once (`reversed: true`), a declined one or one the acquirer never saw is acknowledged without effect
    /// (`reversed: false`). An authorization that arrives after its reversal is declined with `12`
    /// (`reversedBeforeAuthorization`) by the acquirer, and by the network and issuer behind it.
    ///
    /// Throws for a request it refuses (unknown merchant or terminal, another amount than the authorization's,
    /// the same key reversed with another amount) and ``AcquirerError/Code/networkUnavailable`` when the network
    /// did not take it: nothing is recorded, so a retry is safe.
    public func reverse(_ request: AcquirerReversalRequest) async throws -> AcquirerReversalResult {
        let (key, fingerprint) = try Self.reversalKey(request)
        await serializer.acquire(key)
        defer { serializer.release(key) }
        return try await reverseHoldingKey(request, key: key, fingerprint: fingerprint)
    }

    /// The authorization's idempotency key and the reversal's fingerprint; refuses a malformed reason.
    static func reversalKey(_ request: AcquirerReversalRequest) throws(AcquirerError) -> (String, String) {
        let key = try idempotencyKey(origin: request.origin, merchantID: request.merchantID)
        let reasonBytes = Array(request.reason.utf8)
        guard (1...32).contains(reasonBytes.count),
            reasonBytes.allSatisfy({ byte in
                (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
                    || byte == 0x2D || byte == 0x5F
            })
        else { throw AcquirerError(.invalidRequest, "a reversal reason is 1 to 32 letters, digits, '-' or '_'") }
        let fingerprint = hex(
            SHA256.hash(
                Array(
                    [request.merchantID, String(request.amount.minorUnits), request.amount.currency.numericString]
                        .joined(separator: "\u{1F}").utf8)))
        return (key, fingerprint)
    }

    /// The body of ``reverse(_:)``, for a caller that holds the key's serializer.
    func reverseHoldingKey(
        _ request: AcquirerReversalRequest, key: String, fingerprint: String
    ) async throws -> AcquirerReversalResult {
        if let previous = try await store.reversal(idempotencyKey: key) {
            guard previous.requestFingerprint == fingerprint else {
                throw AcquirerError(.idempotencyConflict, "this transaction was reversed with another amount")
            }
            return previous.result
        }
        guard let merchant = try await store.merchant(id: request.merchantID) else {
            throw AcquirerError(.unknownMerchant, "no merchant account with this identifier")
        }
        if case .terminal(let terminalID, _) = request.origin, !merchant.terminalIDs.contains(terminalID) {
            throw AcquirerError(.unknownTerminal, "the terminal is not registered to this merchant")
        }
        let authorization = try await store.authorization(idempotencyKey: key)
        if let authorization, authorization.result.amount != request.amount {
            throw AcquirerError(.invalidRequest, "the reversal's amount or currency is not the authorization's")
        }
        let answer: NetworkAuthorizationAPI.ReversalAnswer
        do {
            answer = try await network.reverse(
                NetworkAuthorizationAPI.ReversalRequest(
                    acquirerID: acquirerID, transactionID: Self.networkTransactionID(for: key),
                    amount: Self.networkMoney(request.amount), transmittedAt: clock.now()))
        } catch {
            // The contract's refusals keep their meaning; anything else means the network did not decide.
            if error.code == .invalidRequest {
                throw AcquirerError(.invalidRequest, "the network refused the reversal")
            }
            if error.code == .idempotencyConflict {
                throw AcquirerError(.idempotencyConflict, "the network has this reversal with another amount")
            }
            throw AcquirerError(.networkUnavailable, "the network did not take the reversal; retry with the same key")
        }
        var outcome = ReversalOutcome(rawValue: answer.outcome)
        if let authorization, !authorization.result.isApproved, outcome != .released { outcome = .notApproved }
        let result = AcquirerReversalResult(
            reversed: outcome.releasedFunds, outcome: outcome, authorizationID: authorization?.result.authorizationID,
            merchantID: merchant.merchantID, amount: request.amount, reversedAt: clock.now())
        try await store.saveReversal(
            AcquirerReversalRecord(
                idempotencyKey: key, requestFingerprint: fingerprint, reason: request.reason, result: result))
        return result
    }

    /// The declined result of an authorization that arrived after its reversal.
    func reversedFirstResult(_ request: AcquirerAuthorizationRequest, merchantID: String) -> AcquirerAuthorizationResult
    {
        AcquirerAuthorizationResult(
            authorizationID: "auth_" + Self.hex(random.bytes(12)), merchantID: merchantID,
            maskedPAN: request.pan.masked, amount: request.amount, responseCode: .invalidTransaction,
            approvalCode: nil, declineReason: NetworkAuthorizationAPI.reversedBeforeAuthorization,
            decidedAt: clock.now())
    }
}
