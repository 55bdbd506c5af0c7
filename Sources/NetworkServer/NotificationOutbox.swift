import Foundation
public import OrchardLogging
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
    private let logger: Logger

    /// The outbox in the vault's file (its migration 2); a notification that cannot be kept is logged to `logger`.
    public init(vault: SQLiteTokenVaultStore, logger: Logger = .disabled) {
        store = vault.store
        self.logger = logger
    }

    public func tokenStatusChanged(_ notification: TokenStatusNotification) async {
        // The token change itself is already committed; a lost notification is recovered by the token
        // requestor's status query, so a failure here must not fail the lifecycle call: one line in the log
        // (the token reference and the event, never card data) and on.
        let metadata: [String: LogValue] = [
            "token_reference": .string(notification.tokenReference), "event": .string(notification.event.rawValue),
        ]
        let record: [UInt8]
        do {
            record = try RecordCoding.encode(notification)
        } catch {
            logger.error("token notification: it could not be encoded; it is not kept", metadata: metadata)
            return
        }
        do {
            try await store.write { database in
                try database.execute(
                    "INSERT INTO token_notifications (token_requestor_id, record) VALUES (?, ?)",
                    [.text(notification.tokenRequestorID), .blob(record)])
            }
        } catch {
            logger.error(
                "token notification: the outbox could not keep it (\(type(of: error))); the status query recovers it",
                metadata: metadata)
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
