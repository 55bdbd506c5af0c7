public import CardBasics
public import Foundation
public import Issuer
public import OrchardCrypto

/// One hold a reconciliation pass looked at: the card only masked.
public struct ReconciledHold: Hashable, Sendable, Codable {
    /// The issuer's network transaction ID (`<acquirer>:<transaction>`); it holds no card data.
    public let networkTransactionID: String
    /// First six and last four digits, or nil when the issuer's entry predates masked numbers.
    public let maskedPAN: String?
    public let amount: Money
    /// Seconds since the issuer approved the hold.
    public let ageSeconds: Int
    /// `released` (the hold was reversed and its amount is back), `notApproved` or `preempted` (the issuer had
    /// nothing to release), or `failed` (the reversal did not go through; the next pass retries it).
    public let outcome: String

    public init(networkTransactionID: String, maskedPAN: String?, amount: Money, ageSeconds: Int, outcome: String) {
        self.networkTransactionID = networkTransactionID
        self.maskedPAN = maskedPAN
        self.amount = amount
        self.ageSeconds = ageSeconds
        self.outcome = outcome
    }
}

/// What one reconciliation pass did.
public struct ReconciliationReport: Hashable, Sendable, Codable {
    /// How many holds were reversed.
    public let count: Int
    /// Every hold without a final answer the pass acted on, oldest first.
    public let holds: [ReconciledHold]

    public init(holds: [ReconciledHold]) {
        self.count = holds.filter { $0.outcome == ReversalOutcome.released.rawValue }.count
        self.holds = holds
    }
}

extension TokenService {
    /// Reverses the issuer hold `entry` when the network recorded no final approval for its authorization, through
    /// the reversal path (``reverse(_:)``'s body, under the same serializer key as the authorization, so an
    /// authorization still in flight finishes first). Returns nil, touching nothing, when an approval is on
    /// record (the authorization completed) or when the transaction ID is not one the network made. A recorded
    /// decline does not protect the hold: the issuer approved but its answer was lost (the network answered
    /// `issuerUnavailable`), so nobody was told of the money held.
    public func reconcileHold(_ entry: IssuerAuthorizationEntry) async throws -> ReversalOutcome? {
        let id = entry.response.networkTransactionID
        guard let separator = id.firstIndex(of: ":") else { return nil }
        let acquirerID = String(id[..<separator])
        let transactionID = String(id[id.index(after: separator)...])
        guard (1...200).contains(transactionID.utf8.count), (1...64).contains(acquirerID.utf8.count) else {
            return nil
        }
        let authorizationScope = "authorization:" + acquirerID
        await serializer.acquire(authorizationScope + "\u{0}" + transactionID)
        defer { serializer.release(authorizationScope + "\u{0}" + transactionID) }
        // A started record has no final answer: nobody was told of the hold, and the retry that would resume it
        // has not come within the bound. A final answer that cannot be read is left alone: reversing an approval
        // the acquirer was given would take money back from a completed payment.
        if let record = try await vault.idempotencyRecord(scope: authorizationScope, key: transactionID),
            record.started == nil
        {
            guard
                // try?: a final answer that cannot be read is left alone, as said above.
                let answer = try? JSONDecoder().decode(NetworkAuthorizationResponse.self, from: Data(record.response)),
                !answer.responseCode.isApproved
            else { return nil }
        }
        let response = try await reverseHoldingKey(
            NetworkReversalRequest(
                acquirerID: acquirerID, transactionID: transactionID, amount: entry.amount,
                transmittedAt: clock.now()))
        return response.outcome
    }
}

/// Finds the issuer's holds with no final answer at the network and reverses them.
///
/// A crash or failed write between the issuer's hold and the token service's record of its answer leaves a
/// hold nobody reverses: the acquirer's retry is declined as a replay. A hold older than ``reconcileAfter``
/// without that record is reversed once through ``TokenService/reverse(_:)``'s path, so the balance is
/// restored exactly once and an authorization that arrives later is declined with `12`. Younger holds are
/// left alone: their authorization may still be in flight. Running it again changes nothing (a reversed hold
/// is no longer open).
public struct NetworkReconciler: Sendable {
    public let tokenService: TokenService
    public let issuer: Issuer
    /// How old an unanswered hold must be before it is reversed, in seconds.
    public let reconcileAfter: TimeInterval
    let clock: any WallClock

    public init(tokenService: TokenService, issuer: Issuer, reconcileAfter: TimeInterval, clock: any WallClock) {
        self.tokenService = tokenService
        self.issuer = issuer
        self.reconcileAfter = reconcileAfter
        self.clock = clock
    }

    /// One pass. A hold whose reversal fails is reported `failed` and retried by the next pass; a store that
    /// cannot be read throws.
    public func run() async throws -> ReconciliationReport {
        let now = clock.now()
        var holds: [ReconciledHold] = []
        for entry in try await issuer.openHolds(decidedBefore: now.addingTimeInterval(-reconcileAfter)) {
            let outcome: String
            do {
                guard let reversed = try await tokenService.reconcileHold(entry) else { continue }
                outcome = reversed.rawValue
            } catch {
                outcome = "failed"
            }
            holds.append(
                ReconciledHold(
                    networkTransactionID: entry.response.networkTransactionID, maskedPAN: entry.maskedPAN,
                    amount: entry.amount, ageSeconds: Int(now.timeIntervalSince(entry.decidedAt)), outcome: outcome))
        }
        return ReconciliationReport(holds: holds)
    }
}
