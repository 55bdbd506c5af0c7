public import Foundation
public import OrchardRuntime
import OrchardStore

/// The terminal's store in `DIR/terminal.sqlite` (mode 0600, WAL): its settings, STAN counters and journal.
///
/// Durability is `synchronous=FULL`, not the `normal` a terminal's receipts would need: a STAN must never
/// be handed out twice (the acquirer would answer a second payment with the first one's result), and a
/// transaction recorded as sent must survive a power loss so its reversal is sent at the next start.
/// Nothing here is a card number: the journal holds the DPAN masked.
public final class TerminalDatabase: TerminalStore {
    public let path: String
    private let store: Store

    static let migrations: [Migration] = [
        Migration(
            version: 1, name: "terminals and journal",
            sql: """
                CREATE TABLE terminals (
                    terminal_id TEXT PRIMARY KEY NOT NULL,
                    settings TEXT NOT NULL,
                    next_stan INTEGER NOT NULL CHECK (next_stan BETWEEN 1 AND 999999),
                    created_at INTEGER NOT NULL
                ) STRICT;
                CREATE TABLE transactions (
                    id INTEGER PRIMARY KEY,
                    terminal_id TEXT NOT NULL REFERENCES terminals (terminal_id),
                    stan TEXT NOT NULL CHECK (length(stan) = 6),
                    started_at INTEGER NOT NULL,
                    updated_at INTEGER NOT NULL,
                    amount INTEGER NOT NULL CHECK (amount > 0),
                    currency TEXT NOT NULL,
                    state TEXT NOT NULL,
                    device_kind TEXT,
                    masked_pan TEXT,
                    scheme TEXT,
                    atc INTEGER,
                    response_code TEXT,
                    approval_code TEXT,
                    reason TEXT,
                    attempts INTEGER NOT NULL DEFAULT 0
                ) STRICT;
                CREATE INDEX transactions_by_terminal ON transactions (terminal_id, id);
                """)
    ]

    /// Opens (creating if needed) the store at `path`.
    public init(path: String) throws(TerminalError) {
        self.path = path
        do {
            store = try Store(path: path, options: StoreOptions(durability: .full), migrations: Self.migrations)
        } catch {
            throw TerminalError(.storeFailure, "cannot open \(path): \(error.message)")
        }
    }

    /// Opens `DIR/terminal.sqlite`, creating the deployment directory (0700) if needed.
    public convenience init(deployment: DeploymentDirectory) throws(TerminalError) {
        do {
            try deployment.create()
        } catch {
            throw TerminalError(.storeFailure, "cannot create \(deployment.path): \(error.message)")
        }
        try self.init(path: deployment.databasePath(for: .terminal))
    }

    /// Finishes the writes already submitted and closes the file.
    public func close() async { await store.close() }

    // MARK: TerminalStore

    public func terminal(_ id: String) async throws -> TerminalSettings? {
        try await run {
            try await self.store.read { db in
                try db.queryFirst("SELECT settings FROM terminals WHERE terminal_id = ?", [.text(id)]) {
                    try Self.decodeSettings(try $0.string(0))
                }
            }
        }
    }

    public func terminals() async throws -> [TerminalSettings] {
        try await run {
            try await self.store.read { db in
                try db.query("SELECT settings FROM terminals ORDER BY terminal_id") {
                    try Self.decodeSettings(try $0.string(0))
                }
            }
        }
    }

    public func saveTerminal(_ settings: TerminalSettings) async throws {
        let json = try Self.encodeSettings(settings)
        let now = Date()
        try await run {
            try await self.store.write { db in
                _ = try db.execute(
                    """
                    INSERT INTO terminals (terminal_id, settings, next_stan, created_at) VALUES (?, ?, 1, ?)
                    ON CONFLICT (terminal_id) DO UPDATE SET settings = excluded.settings
                    """, [.text(settings.terminalID), .text(json), .milliseconds(now)])
            }
        }
    }

    public func begin(
        terminalID: String, amountMinorUnits: Int64, currency: String, startedAt: Date
    ) async throws -> TransactionRecord {
        let taken = try await run {
            try await self.store.write { db -> (Int64, String)? in
                guard
                    let next = try db.queryFirst(
                        "SELECT next_stan FROM terminals WHERE terminal_id = ?", [.text(terminalID)], { try $0.int(0) })
                else { return nil }
                let stan = STAN.format(next)
                _ = try db.execute(
                    "UPDATE terminals SET next_stan = ? WHERE terminal_id = ?",
                    [.int(next >= 999_999 ? 1 : next + 1), .text(terminalID)])
                _ = try db.execute(
                    """
                    INSERT INTO transactions (terminal_id, stan, started_at, updated_at, amount, currency, state)
                    VALUES (?, ?, ?, ?, ?, ?, ?)
                    """,
                    [
                        .text(terminalID), .text(stan), .milliseconds(startedAt), .milliseconds(startedAt),
                        .integer(amountMinorUnits), .text(currency), .text(TransactionState.started.rawValue),
                    ])
                return (db.lastInsertRowID, stan)
            }
        }
        guard let (id, stan) = taken else {
            throw TerminalError(.notConfigured, "no terminal \(terminalID): run `orchard terminal setup`")
        }
        return TransactionRecord(
            id: id, terminalID: terminalID, systemTraceAuditNumber: stan,
            startedAt: Date(orchardMilliseconds: startedAt.orchardMilliseconds), amountMinorUnits: amountMinorUnits,
            currency: currency)
    }

    public func update(_ record: TransactionRecord) async throws {
        let changed = try await run {
            try await self.store.write { db in
                try db.execute(
                    """
                    UPDATE transactions SET updated_at = ?, state = ?, device_kind = ?, masked_pan = ?, scheme = ?,
                        atc = ?, response_code = ?, approval_code = ?, reason = ?, attempts = ?
                    WHERE id = ?
                    """,
                    [
                        .milliseconds(record.updatedAt), .text(record.state.rawValue), .optional(record.deviceKind),
                        .optional(record.maskedPAN), .optional(record.scheme),
                        .optional(record.applicationTransactionCounter.map { Int64($0) }),
                        .optional(record.responseCode),
                        .optional(record.approvalCode), .optional(record.reason), .int(record.attempts),
                        .integer(record.id),
                    ])
            }
        }
        guard changed == 1 else { throw TerminalError(.storeFailure, "no journal line \(record.id)") }
    }

    public func transactions(terminalID: String, limit: Int) async throws -> [TransactionRecord] {
        try await run {
            try await self.store.read { db in
                try db.query(
                    "SELECT \(Self.columns) FROM transactions WHERE terminal_id = ? ORDER BY id DESC LIMIT ?",
                    [.text(terminalID), .int(max(0, limit))], Self.record)
            }
        }
    }

    public func unresolved(terminalID: String) async throws -> [TransactionRecord] {
        try await run {
            try await self.store.read { db in
                try db.query(
                    """
                    SELECT \(Self.columns) FROM transactions
                    WHERE terminal_id = ? AND state IN ('started', 'sent', 'reversal-pending') ORDER BY id
                    """, [.text(terminalID)], Self.record)
            }
        }
    }

    // MARK: Rows

    private static let columns = """
        id, terminal_id, stan, started_at, updated_at, amount, currency, state, device_kind, masked_pan, scheme, atc, \
        response_code, approval_code, reason, attempts
        """

    private static func record(_ row: Row) throws -> TransactionRecord {
        guard let state = TransactionState(rawValue: try row.string(7)) else {
            throw TerminalError(.storeFailure, "a journal line has an unknown state")
        }
        var record = TransactionRecord(
            id: try row.int64(0), terminalID: try row.string(1), systemTraceAuditNumber: try row.string(2),
            startedAt: try row.date(3), amountMinorUnits: try row.int64(5), currency: try row.string(6), state: state)
        record.updatedAt = try row.date(4)
        record.deviceKind = try row.optionalString(8)
        record.maskedPAN = try row.optionalString(9)
        record.scheme = try row.optionalString(10)
        record.applicationTransactionCounter = try row.optionalInt64(11).map { Int($0) }
        record.responseCode = try row.optionalString(12)
        record.approvalCode = try row.optionalString(13)
        record.reason = try row.optionalString(14)
        record.attempts = try row.int(15)
        return record
    }

    private static func encodeSettings(_ settings: TerminalSettings) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(settings), as: UTF8.self)
    }

    private static func decodeSettings(_ json: String) throws -> TerminalSettings {
        do {
            return try JSONDecoder().decode(TerminalSettings.self, from: Data(json.utf8))
        } catch {
            throw TerminalError(.storeFailure, "a stored terminal configuration is not valid")
        }
    }

    /// Maps the store's errors to ``TerminalError/Code/storeFailure`` (terminal errors pass unchanged).
    private func run<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as TerminalError {
            throw error
        } catch let error as StoreError {
            throw TerminalError(.storeFailure, "\(path): \(error.message)")
        }
    }
}
