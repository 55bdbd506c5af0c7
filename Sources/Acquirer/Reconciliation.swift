public import CardBasics
public import Foundation
import Issuer
import OrchardCrypto

/// One authorization an acquirer reconciliation pass reversed (or tried to): the card only masked.
public struct AcquirerReconciledAuthorization: Hashable, Sendable, Codable {
    /// The authorization's idempotency key (`terminal:<ID>:<STAN>` or `merchant:<ID>:<key>`); no card data.
    public let idempotencyKey: String
    public let maskedPAN: String
    public let amount: Money
    /// Seconds since the acquirer sent it to the network.
    public let ageSeconds: Int
    /// The reversal's ``Issuer/ReversalOutcome`` (`released`, `notApproved`, `preempted`), or `failed` when the
    /// network did not take it (the next pass retries).
    public let outcome: String

    public init(idempotencyKey: String, maskedPAN: String, amount: Money, ageSeconds: Int, outcome: String) {
        self.idempotencyKey = idempotencyKey
        self.maskedPAN = maskedPAN
        self.amount = amount
        self.ageSeconds = ageSeconds
        self.outcome = outcome
    }
}

extension Acquirer {
    /// Reverses every authorization sent to the network before `date` that has no result and no reversal: its
    /// client (a terminal, a merchant server) never came back for the answer, or this process stopped before
    /// recording it, so money may be held that nobody was told of. Each goes through ``reverse(_:)`` with reason
    /// `reconciliation`, so a retry of it that arrives later is declined with `12`. Under the authorization's
    /// key, an authorization that completed meanwhile is left alone. Running it again changes nothing.
    public func reconcile(sentBefore date: Date) async throws -> [AcquirerReconciledAuthorization] {
        let now = clock.now()
        var reconciled: [AcquirerReconciledAuthorization] = []
        for pending in try await store.pendingAuthorizations(sentBefore: date) {
            let request = AcquirerReversalRequest(
                origin: pending.origin, merchantID: pending.merchantID, amount: pending.amount,
                reason: "reconciliation")
            let (key, fingerprint) = try Self.reversalKey(request)
            await serializer.acquire(key)
            defer { serializer.release(key) }
            // Answered or reversed since the list was read: nothing left to do.
            if try await store.authorization(idempotencyKey: key) != nil { continue }
            if try await store.reversal(idempotencyKey: key) != nil { continue }
            let outcome: String
            do {
                outcome = try await reverseHoldingKey(request, key: key, fingerprint: fingerprint).outcome.rawValue
            } catch {
                outcome = "failed"
            }
            reconciled.append(
                AcquirerReconciledAuthorization(
                    idempotencyKey: pending.idempotencyKey, maskedPAN: pending.maskedPAN, amount: pending.amount,
                    ageSeconds: Int(now.timeIntervalSince(pending.sentAt)), outcome: outcome))
        }
        return reconciled
    }
}
