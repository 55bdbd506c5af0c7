public import CardBasics
public import Foundation
import OrchardCrypto

/// What a reversal did. The same value travels back through every party (issuer → token service →
/// acquirer → terminal), so each can tell whether money moved.
///
/// | outcome | meaning |
/// |---|---|
/// | `released` | an approved authorization was cancelled: its held amount is back on the account, once |
/// | `notApproved` | the authorization was declined: nothing was held, nothing changes |
/// | `preempted` | no such authorization had arrived: one that arrives later is declined with `12` |
public struct ReversalOutcome: Hashable, Sendable, Codable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    /// An approved authorization was cancelled and its amount released.
    public static let released = ReversalOutcome(rawValue: "released")
    /// The authorization was declined: there was nothing to release.
    public static let notApproved = ReversalOutcome(rawValue: "notApproved")
    /// The reversal came first: the authorization it names is blocked and will be declined if it arrives.
    public static let preempted = ReversalOutcome(rawValue: "preempted")

    /// Whether money was released (the `reversed` of the terminal's answer).
    public var releasedFunds: Bool { self == .released }

    public init(from decoder: any Decoder) throws { rawValue = try decoder.singleValueContainer().decode(String.self) }
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
    public var description: String { rawValue }
}

extension ResponseCode {
    /// `12` invalid transaction: an authorization that arrives after its own reversal.
    public static let invalidTransaction = ResponseCode(rawValue: "12")
}

/// A reversal as the network sends it to the issuer: cancel the authorization with this network transaction ID.
public struct IssuerReversalRequest: Hashable, Sendable, Codable {
    /// The ``IssuerAuthorizationRequest/networkTransactionID`` of the authorization to cancel.
    public let networkTransactionID: String
    /// The amount of the authorization; a reversal naming another amount or currency is refused.
    public let amount: Money
    public let transmittedAt: Date

    public init(networkTransactionID: String, amount: Money, transmittedAt: Date) {
        self.networkTransactionID = networkTransactionID
        self.amount = amount
        self.transmittedAt = transmittedAt
    }
}

/// The issuer's answer to a reversal.
public struct IssuerReversalResponse: Hashable, Sendable, Codable {
    public let networkTransactionID: String
    public let outcome: ReversalOutcome

    public init(networkTransactionID: String, outcome: ReversalOutcome) {
        self.networkTransactionID = networkTransactionID
        self.outcome = outcome
    }
}

extension IssuerHost {
    /// A host that does not implement reversals refuses them, so the sender keeps its reversal pending
    /// instead of believing it was applied.
    public func reverse(_ request: IssuerReversalRequest) async throws -> IssuerReversalResponse {
        throw IssuerError(.notPermitted, "this issuer host does not take reversals")
    }
}

extension IssuerStore {
    /// Stores `entry` and, when given, `account`. Stores with transactions override this to write both at
    /// once; this default writes the account first.
    public func saveAuthorization(_ entry: IssuerAuthorizationEntry, account: IssuerAccount?) async throws {
        if let account { try await saveAccount(account) }
        try await saveAuthorization(entry)
    }
}

extension Issuer {
    /// The fingerprint a reversal that came before its authorization leaves: the transaction ID is blocked.
    static let preemptedFingerprint = "preempted-by-reversal"

    /// Reverses the authorization `request` names, exactly once:
    /// - approved and not yet reversed: the amount goes back to the account (a credit line's balance owed
    ///   drops, a debit balance rises) in the same store transaction that marks it reversed → `released`;
    /// - declined: nothing was held → `notApproved`;
    /// - unknown: the transaction ID is recorded as reversed, so an authorization that arrives later is
    ///   declined with `12` and moves no money → `preempted`.
    ///
    /// A repeated reversal returns the first outcome. Serialized with authorizations of the same transaction ID
    /// and with every decision on the same account. Throws ``IssuerError/Code/invalidInput`` when the amount or
    /// currency is not the authorization's.
    public func reverse(_ request: IssuerReversalRequest) async throws -> IssuerReversalResponse {
        let id = request.networkTransactionID
        guard (1...200).contains(id.utf8.count) else {
            throw IssuerError(.invalidInput, "a network transaction ID is 1 to 200 bytes")
        }
        await serializer.acquire("txn:" + id)
        defer { serializer.release("txn:" + id) }
        func answer(_ outcome: ReversalOutcome) -> IssuerReversalResponse {
            IssuerReversalResponse(networkTransactionID: id, outcome: outcome)
        }
        guard var entry = try await store.authorization(networkTransactionID: id) else {
            var marker = IssuerAuthorizationEntry(
                response: IssuerAuthorizationResponse(
                    networkTransactionID: id, responseCode: .invalidTransaction, approvalCode: nil,
                    reason: "reversed before the authorization arrived"),
                accountID: nil, amount: request.amount, requestFingerprint: Self.preemptedFingerprint,
                decidedAt: clock.now())
            marker.reversedAt = clock.now()
            try await store.saveAuthorization(marker, account: nil)
            return answer(.preempted)
        }
        guard entry.amount == request.amount else {
            throw IssuerError(.invalidInput, "the reversal's amount or currency is not the authorization's")
        }
        if entry.requestFingerprint == Self.preemptedFingerprint { return answer(.preempted) }
        guard entry.response.responseCode.isApproved, let accountID = entry.accountID else {
            return answer(.notApproved)
        }
        if entry.reversedAt != nil { return answer(.released) }
        await serializer.acquire("account:" + accountID)
        defer { serializer.release("account:" + accountID) }
        guard var account = try await store.account(id: accountID) else {
            throw IssuerError(.storeFailure, "the authorization's account is missing")
        }
        account.balance += account.kind == .credit ? -entry.amount.minorUnits : entry.amount.minorUnits
        entry.reversedAt = clock.now()
        try await store.saveAuthorization(entry, account: account)
        return answer(.released)
    }
}

extension Issuer {
    /// The holds still open: approved authorizations decided before `date` that no reversal has cancelled.
    /// Reconciliation asks the network which of them have no final answer.
    public func openHolds(decidedBefore date: Date) async throws -> [IssuerAuthorizationEntry] {
        try await store.authorizations(decidedBefore: date).filter { entry in
            entry.response.responseCode.isApproved && entry.reversedAt == nil && entry.accountID != nil
                && entry.requestFingerprint != Self.preemptedFingerprint
        }
    }
}
