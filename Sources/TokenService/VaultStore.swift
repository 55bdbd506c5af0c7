public import CardBasics
public import Foundation
import Issuer

/// The token service's persistence: tokens, cards, provisioning sessions and idempotency records.
///
/// An SQLite implementation lives with the network service; ``InMemoryTokenVaultStore`` serves tests and
/// the embedded demo. Saves are upserts keyed by the record's identifier; implementations must keep
/// DPANs and card lookup hashes unique and throw when a save would break that.
public protocol TokenVaultStore: Sendable {
    func card(id: String) async throws -> CardRecord?
    func card(panLookup: String) async throws -> CardRecord?
    func saveCard(_ card: CardRecord) async throws

    func token(reference: String) async throws -> TokenRecord?
    func token(dpan: PrimaryAccountNumber) async throws -> TokenRecord?
    func tokens(cardID: String) async throws -> [TokenRecord]
    func tokens(deviceID: String) async throws -> [TokenRecord]
    func saveToken(_ token: TokenRecord) async throws
    /// Saves `token` and `record` in one transaction: both or neither. An authorization records its ATC on the
    /// token together with the record that says it started, so a crash never leaves a used counter that no
    /// record explains (the retry would be declined as a replay).
    func saveToken(_ token: TokenRecord, with record: IdempotencyRecord) async throws
    /// ``saveToken(_:with:)`` if the stored token is still `expected` (what the caller read and decided on): false,
    /// with nothing saved, when another writer changed it meanwhile. Several instances of the token service on one
    /// database use it to record an ATC at most once; the caller reads the token again and decides anew.
    func saveToken(
        _ token: TokenRecord, with record: IdempotencyRecord, ifUnchangedFrom expected: TokenRecord
    ) async throws -> Bool

    func session(id: String) async throws -> ProvisioningSession?
    func saveSession(_ session: ProvisioningSession) async throws
    /// The clock every instance of the token service reads (a shared database's), or nil when one process owns the
    /// store and its own clocks decide. Provisioning sessions expire on it when there is one.
    func sharedClock() async throws -> Date?
    /// Deletes the provisioning sessions whose ``ProvisioningSession/expiresAt`` is before `date` (a session
    /// stored before the column existed, from before a restart and so expired, goes too); returns how many.
    func purgeSessions(expiredBefore date: Date) async throws -> Int

    func idempotencyRecord(scope: String, key: String) async throws -> IdempotencyRecord?
    func saveIdempotencyRecord(_ record: IdempotencyRecord) async throws
}

extension TokenVaultStore {
    /// For stores one process owns, where the token service's per-token serializer already orders the writers:
    /// saves unconditionally.
    public func saveToken(
        _ token: TokenRecord, with record: IdempotencyRecord, ifUnchangedFrom expected: TokenRecord
    ) async throws -> Bool {
        try await saveToken(token, with: record)
        return true
    }

    /// No shared clock: the default for stores one process owns.
    public func sharedClock() async throws -> Date? { nil }
}

/// Everything a vault store holds, for inspection (tests check that no FPAN or CVV is in it).
public struct VaultSnapshot: Hashable, Sendable, Codable {
    public let cards: [CardRecord]
    public let tokens: [TokenRecord]
    public let sessions: [ProvisioningSession]
    public let idempotencyRecords: [IdempotencyRecord]
}

/// A ``TokenVaultStore`` in memory, for tests and the embedded demo.
public final class InMemoryTokenVaultStore: TokenVaultStore, @unchecked Sendable {
    // Every property is guarded by `lock`.
    private let lock = NSLock()
    private var cards: [String: CardRecord] = [:]
    private var cardsByLookup: [String: String] = [:]
    private var tokens: [String: TokenRecord] = [:]
    private var tokensByDPAN: [String: String] = [:]
    private var sessions: [String: ProvisioningSession] = [:]
    private var idempotency: [String: IdempotencyRecord] = [:]

    public init() {}

    public func card(id: String) async throws -> CardRecord? { lock.withLock { cards[id] } }

    public func card(panLookup: String) async throws -> CardRecord? {
        lock.withLock { cardsByLookup[panLookup].flatMap { cards[$0] } }
    }

    public func saveCard(_ card: CardRecord) async throws {
        try lock.withLock {
            if let owner = cardsByLookup[card.panLookup], owner != card.cardID {
                throw TokenServiceError(.storeFailure, "another card record has this lookup hash")
            }
            if let old = cards[card.cardID], old.panLookup != card.panLookup { cardsByLookup[old.panLookup] = nil }
            cards[card.cardID] = card
            cardsByLookup[card.panLookup] = card.cardID
        }
    }

    public func token(reference: String) async throws -> TokenRecord? { lock.withLock { tokens[reference] } }

    public func token(dpan: PrimaryAccountNumber) async throws -> TokenRecord? {
        lock.withLock { tokensByDPAN[dpan.digits].flatMap { tokens[$0] } }
    }

    public func tokens(cardID: String) async throws -> [TokenRecord] {
        lock.withLock { tokens.values.filter { $0.cardID == cardID }.sorted { $0.createdAt < $1.createdAt } }
    }

    public func tokens(deviceID: String) async throws -> [TokenRecord] {
        lock.withLock { tokens.values.filter { $0.deviceID == deviceID }.sorted { $0.createdAt < $1.createdAt } }
    }

    public func saveToken(_ token: TokenRecord) async throws {
        try lock.withLock {
            if let owner = tokensByDPAN[token.dpan.digits], owner != token.tokenReference {
                throw TokenServiceError(.storeFailure, "another token has this DPAN")
            }
            tokens[token.tokenReference] = token
            tokensByDPAN[token.dpan.digits] = token.tokenReference
        }
    }

    public func saveToken(_ token: TokenRecord, with record: IdempotencyRecord) async throws {
        try lock.withLock {
            if let owner = tokensByDPAN[token.dpan.digits], owner != token.tokenReference {
                throw TokenServiceError(.storeFailure, "another token has this DPAN")
            }
            tokens[token.tokenReference] = token
            tokensByDPAN[token.dpan.digits] = token.tokenReference
            idempotency[record.scope + "\u{0}" + record.key] = record
        }
    }

    public func session(id: String) async throws -> ProvisioningSession? { lock.withLock { sessions[id] } }

    public func saveSession(_ session: ProvisioningSession) async throws {
        lock.withLock { sessions[session.sessionID] = session }
    }

    public func purgeSessions(expiredBefore date: Date) async throws -> Int {
        lock.withLock {
            let expired = sessions.values.filter { $0.expiresAt < date }.map(\.sessionID)
            for id in expired { sessions[id] = nil }
            return expired.count
        }
    }

    public func idempotencyRecord(scope: String, key: String) async throws -> IdempotencyRecord? {
        lock.withLock { idempotency[scope + "\u{0}" + key] }
    }

    public func saveIdempotencyRecord(_ record: IdempotencyRecord) async throws {
        lock.withLock { idempotency[record.scope + "\u{0}" + record.key] = record }
    }

    /// A copy of everything held, sorted by identifier.
    public func snapshot() -> VaultSnapshot {
        lock.withLock {
            VaultSnapshot(
                cards: cards.values.sorted { $0.cardID < $1.cardID },
                tokens: tokens.values.sorted { $0.tokenReference < $1.tokenReference },
                sessions: sessions.values.sorted { $0.sessionID < $1.sessionID },
                idempotencyRecords: idempotency.values.sorted { ($0.scope, $0.key) < ($1.scope, $1.key) })
        }
    }
}
