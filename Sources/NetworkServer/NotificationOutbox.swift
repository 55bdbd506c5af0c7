import Foundation
import OrchardStore
public import TokenService

/// Token-status notifications kept durably in `network.sqlite` until the token requestor fetches them
/// (`GET /v1/notifications?after=N`): the Pay server may be down when the issuer suspends a token, and the
/// notification must still reach the wallet afterwards. Each has an increasing sequence number; the token
/// requestor remembers the last one it processed. Each requestor reads only its own tokens' notifications.
///
/// A notification carries the token reference, never the DPAN.
public final class SQLiteNotificationOutbox: TokenStatusNotifier {
    private let store: Store

    /// The outbox in the vault's file (its migration 2).
    public init(vault: SQLiteTokenVaultStore) { store = vault.store }

    public func tokenStatusChanged(_ notification: TokenStatusNotification) async {
        // The token change itself is already committed; a lost notification is recovered by the token
        // requestor's status query, so a failure here must not fail the lifecycle call.
        guard let record = try? RecordCoding.encode(notification) else { return }
        _ = try? await store.write { database in
            try database.execute(
                "INSERT INTO token_notifications (token_requestor_id, record) VALUES (?, ?)",
                [.text(notification.tokenRequestorID), .blob(record)])
        }
    }

    /// `tokenRequestorID`'s notifications with a sequence above `after`, oldest first, at most `limit`. The
    /// sequence is shared by all requestors, so a requestor sees gaps where another's notifications are.
    public func notifications(
        for tokenRequestorID: String, after: Int64, limit: Int = 100
    ) async throws -> [SequencedNotification] {
        try await store.read { database in
            try database.query(
                """
                SELECT sequence, record FROM token_notifications WHERE token_requestor_id = ? AND sequence > ?
                ORDER BY sequence LIMIT ?
                """,
                [.text(tokenRequestorID), .integer(after), .integer(Int64(limit))]
            ) { row in
                SequencedNotification(
                    sequence: try row.int64(0),
                    notification: try RecordCoding.decode(TokenStatusNotification.self, try row.blob(1)))
            }
        }
    }
}

/// A notification with its place in the outbox (served as `TokenRequestorAPI.TokenNotification`).
public struct SequencedNotification: Sendable, Hashable {
    public let sequence: Int64
    public let notification: TokenStatusNotification
}
