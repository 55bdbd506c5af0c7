public import Acquirer
public import CardBasics
public import Foundation
public import Issuer
public import OrchardCrypto
public import OrchardRuntime
import OrchardServices
public import OrchardStore
public import TokenService

/// The token vault in `network.sqlite`: cards (encrypted FPAN, keyed-hash lookup), tokens (DPAN, unique),
/// provisioning sessions and idempotency records.
public final class SQLiteTokenVaultStore: TokenVaultStore {
    public let store: Store

    public static let migrations = [
        Migration(
            version: 1, name: "token vault",
            sql: """
                CREATE TABLE cards (
                    card_id TEXT PRIMARY KEY, pan_lookup TEXT NOT NULL UNIQUE, record BLOB NOT NULL) STRICT;
                CREATE TABLE tokens (
                    token_reference TEXT PRIMARY KEY, dpan TEXT NOT NULL UNIQUE, card_id TEXT NOT NULL,
                    device_id TEXT NOT NULL, created_at INTEGER NOT NULL, record BLOB NOT NULL) STRICT;
                CREATE INDEX tokens_by_card ON tokens (card_id);
                CREATE INDEX tokens_by_device ON tokens (device_id);
                CREATE TABLE provisioning_sessions (session_id TEXT PRIMARY KEY, record BLOB NOT NULL) STRICT;
                CREATE TABLE idempotency_records (
                    scope TEXT NOT NULL, key TEXT NOT NULL, record BLOB NOT NULL, PRIMARY KEY (scope, key)) STRICT;
                """),
        Migration(
            version: 2, name: "token-status notification outbox",
            sql: """
                CREATE TABLE token_notifications (
                    sequence INTEGER PRIMARY KEY AUTOINCREMENT, token_requestor_id TEXT NOT NULL,
                    record BLOB NOT NULL) STRICT;
                """),
        // Provisioning sessions purged on a schedule by their expiry (``purgeSessions(expiredBefore:)``).
        Migration(
            version: 3, name: "provisioning sessions by expiry",
            sql: """
                ALTER TABLE provisioning_sessions ADD COLUMN expires_at INTEGER;
                CREATE INDEX provisioning_sessions_by_expiry ON provisioning_sessions (expires_at);
                """),
    ]

    /// Opens (creating and migrating) the vault at `path`.
    public convenience init(path: String) throws { try self.init(location: .file(path)) }

    /// Opens (creating and migrating) the store at `location` (a file, or a PostgreSQL schema).
    public init(location: StoreLocation) throws {
        store = try Store(location: location, options: RecordCoding.options, migrations: Self.migrations)
    }

    public func card(id: String) async throws -> CardRecord? {
        try await store.record(CardRecord.self, "SELECT record FROM cards WHERE card_id = ?", [.text(id)])
    }

    public func card(panLookup: String) async throws -> CardRecord? {
        try await store.record(CardRecord.self, "SELECT record FROM cards WHERE pan_lookup = ?", [.text(panLookup)])
    }

    public func saveCard(_ card: CardRecord) async throws {
        let record = try RecordCoding.encode(card)
        try await store.write { database in
            try database.execute(
                """
                INSERT INTO cards (card_id, pan_lookup, record) VALUES (?, ?, ?)
                ON CONFLICT (card_id) DO UPDATE SET pan_lookup = excluded.pan_lookup, record = excluded.record
                """, [.text(card.cardID), .text(card.panLookup), .blob(record)])
        }
    }

    public func token(reference: String) async throws -> TokenRecord? {
        try await store.record(
            TokenRecord.self, "SELECT record FROM tokens WHERE token_reference = ?", [.text(reference)])
    }

    public func token(dpan: PrimaryAccountNumber) async throws -> TokenRecord? {
        try await store.record(TokenRecord.self, "SELECT record FROM tokens WHERE dpan = ?", [.text(dpan.digits)])
    }

    public func tokens(cardID: String) async throws -> [TokenRecord] {
        try await store.records(
            TokenRecord.self, "SELECT record FROM tokens WHERE card_id = ? ORDER BY created_at, token_reference",
            [.text(cardID)])
    }

    public func tokens(deviceID: String) async throws -> [TokenRecord] {
        try await store.records(
            TokenRecord.self, "SELECT record FROM tokens WHERE device_id = ? ORDER BY created_at, token_reference",
            [.text(deviceID)])
    }

    public func saveToken(_ token: TokenRecord) async throws {
        let record = try RecordCoding.encode(token)
        try await store.write { database in try Self.upsert(token, record, in: database) }
    }

    public func saveToken(_ token: TokenRecord, with idempotencyRecord: IdempotencyRecord) async throws {
        let record = try RecordCoding.encode(token)
        let bytes = try RecordCoding.encode(idempotencyRecord)
        try await store.write { database in
            try Self.upsert(token, record, in: database)
            try Self.upsert(idempotencyRecord, bytes, in: database)
        }
    }

    /// Compare-and-set inside one write transaction (SERIALIZABLE on PostgreSQL): the stored token must still be
    /// `expected`, else nothing is saved and the answer is false (another instance recorded a counter first).
    public func saveToken(
        _ token: TokenRecord, with idempotencyRecord: IdempotencyRecord, ifUnchangedFrom expected: TokenRecord
    ) async throws -> Bool {
        let record = try RecordCoding.encode(token)
        let bytes = try RecordCoding.encode(idempotencyRecord)
        return try await store.write { database in
            let stored = try database.queryFirst(
                "SELECT record FROM tokens WHERE token_reference = ?", [.text(expected.tokenReference)]
            ) { row in try row.blob(0) }
            guard let stored, try RecordCoding.decode(TokenRecord.self, stored) == expected else { return false }
            try Self.upsert(token, record, in: database)
            try Self.upsert(idempotencyRecord, bytes, in: database)
            return true
        }
    }

    static func upsert(_ token: TokenRecord, _ record: [UInt8], in database: Database) throws {
        try database.execute(
            """
            INSERT INTO tokens (token_reference, dpan, card_id, device_id, created_at, record)
            VALUES (?, ?, ?, ?, ?, ?)
            ON CONFLICT (token_reference) DO UPDATE SET card_id = excluded.card_id, record = excluded.record
            """,
            [
                .text(token.tokenReference), .text(token.dpan.digits), .text(token.cardID), .text(token.deviceID),
                .milliseconds(token.createdAt), .blob(record),
            ])
    }

    static func upsert(_ record: IdempotencyRecord, _ bytes: [UInt8], in database: Database) throws {
        try database.execute(
            """
            INSERT INTO idempotency_records (scope, key, record) VALUES (?, ?, ?)
            ON CONFLICT (scope, key) DO UPDATE SET record = excluded.record
            """, [.text(record.scope), .text(record.key), .blob(bytes)])
    }

    public func session(id: String) async throws -> ProvisioningSession? {
        try await store.record(
            ProvisioningSession.self, "SELECT record FROM provisioning_sessions WHERE session_id = ?", [.text(id)])
    }

    /// The database's clock on PostgreSQL (shared by every instance), nil on SQLite.
    public func sharedClock() async throws -> Date? { try await store.databaseClock() }

    public func saveSession(_ session: ProvisioningSession) async throws {
        let record = try RecordCoding.encode(session)
        try await store.write { database in
            try database.execute(
                """
                INSERT INTO provisioning_sessions (session_id, record, expires_at) VALUES (?, ?, ?)
                ON CONFLICT (session_id) DO UPDATE SET record = excluded.record, expires_at = excluded.expires_at
                """, [.text(session.sessionID), .blob(record), .milliseconds(session.expiresAt)])
        }
    }

    public func purgeSessions(expiredBefore date: Date) async throws -> Int {
        try await store.write { database in
            try database.execute(
                "DELETE FROM provisioning_sessions WHERE expires_at IS NULL OR expires_at < ?", [.milliseconds(date)])
        }
    }

    public func idempotencyRecord(scope: String, key: String) async throws -> IdempotencyRecord? {
        try await store.record(
            IdempotencyRecord.self, "SELECT record FROM idempotency_records WHERE scope = ? AND key = ?",
            [.text(scope), .text(key)])
    }

    public func saveIdempotencyRecord(_ record: IdempotencyRecord) async throws {
        let bytes = try RecordCoding.encode(record)
        try await store.write { database in try Self.upsert(record, bytes, in: database) }
    }
}

/// The issuer's accounts, cards, authorizations and step-up challenges in `issuer.sqlite`. No card number is
/// in clear: cards are found by a keyed hash of the number and their records, like the step-up challenges that
/// name a card, are sealed under the issuer's own ``IssuerStorageKey`` (as the token vault keeps FPANs).
///
/// A deployment made before the sealing (cards keyed by the number in clear) is migrated when the store opens:
/// migration 2 renames the clear tables, ``open(path:key:)`` seals every row into the new ones and drops the
/// clear tables (`secure_delete` overwrites their pages) in one transaction.
public final class SQLiteIssuerStore: IssuerStore {
    public let store: Store
    let key: IssuerStorageKey

    public static let migrations = [
        Migration(
            version: 1, name: "issuer",
            sql: """
                CREATE TABLE accounts (account_id TEXT PRIMARY KEY, record BLOB NOT NULL) STRICT;
                CREATE TABLE cards (pan TEXT PRIMARY KEY, record BLOB NOT NULL) STRICT;
                CREATE TABLE authorizations (network_transaction_id TEXT PRIMARY KEY, record BLOB NOT NULL) STRICT;
                CREATE TABLE step_ups (reference TEXT PRIMARY KEY, record BLOB NOT NULL) STRICT;
                """),
        Migration(
            version: 2, name: "issuer cards sealed, found by keyed hash",
            sql: """
                ALTER TABLE cards RENAME TO clear_cards;
                ALTER TABLE step_ups RENAME TO clear_step_ups;
                CREATE TABLE cards (pan_lookup TEXT PRIMARY KEY, sealed_record BLOB NOT NULL) STRICT;
                CREATE TABLE step_ups (reference TEXT PRIMARY KEY, sealed_record BLOB NOT NULL) STRICT;
                CREATE TABLE storage_key (check_value TEXT NOT NULL) STRICT;
                """),
    ]

    init(store: Store, key: IssuerStorageKey) {
        self.store = store
        self.key = key
    }

    /// Opens (creating and migrating) `issuer.sqlite` at `path` with the issuer's storage key: refuses a file
    /// sealed under another key, and seals the clear records an older deployment left.
    public static func open(path: String, key: IssuerStorageKey) async throws -> SQLiteIssuerStore {
        try await open(location: .file(path), key: key)
    }

    /// ``open(path:key:)`` at `location` (a file, or a PostgreSQL schema).
    public static func open(location: StoreLocation, key: IssuerStorageKey) async throws -> SQLiteIssuerStore {
        let store = try Store(location: location, options: RecordCoding.options, migrations: migrations)
        do {
            let migrated = try await store.write { database in try Self.adopt(key, in: database) }
            // The clear pages `secure_delete` zeroed are in the log until a checkpoint: make it now, so the
            // card numbers leave the database file and the log at once.
            if migrated { try await store.onWriter { database in try database.checkpoint() } }
        } catch {
            await store.close()
            throw error
        }
        return SQLiteIssuerStore(store: store, key: key)
    }

    /// Opens the deployment's `issuer.sqlite` with `pki/network/network-issuer-vault.key` (or `.wrapped`, opened
    /// with the KEK at `kekPath`).
    public static func open(
        in directory: DeploymentDirectory, kekPath: String = "", random: any RandomSource = SystemRandom()
    ) async throws -> SQLiteIssuerStore {
        try await open(
            location: try StoreSettings.location(for: .issuer, in: directory),
            key: try IssuerStorageKey.load(from: directory, kekPath: kekPath, random: random))
    }

    /// Checks (or records) the key's check value, then seals what the clear tables hold and drops them. Returns
    /// whether there were clear tables.
    static func adopt(_ key: IssuerStorageKey, in database: Database) throws -> Bool {
        let recorded = try database.query("SELECT check_value FROM storage_key", []) { row in try row.string(0) }
        if let recorded = recorded.first {
            guard recorded == key.checkValue else {
                throw ServicesError(
                    .pkiFailure,
                    "issuer.sqlite is sealed under another key than pki/network/\(IssuerStorageKey.fileName).key; "
                        + "restore that key file")
            }
        } else {
            _ = try database.execute("INSERT INTO storage_key (check_value) VALUES (?)", [.text(key.checkValue)])
        }
        let tables = try ["clear_cards", "clear_step_ups"].filter { name in try database.tableExists(name) }
        guard !tables.isEmpty else { return false }
        let cards = try database.query("SELECT record FROM clear_cards", []) { row in try row.blob(0) }
        for bytes in cards {
            let card = try RecordCoding.decode(IssuedCard.self, bytes)
            let lookup = key.lookup(card.pan.digits)
            _ = try database.execute(
                "INSERT INTO cards (pan_lookup, sealed_record) VALUES (?, ?)",
                [.text(lookup), .blob(try key.seal(bytes, context: "cards|" + lookup))])
        }
        let stepUps = try database.query("SELECT reference, record FROM clear_step_ups", []) { row in
            (try row.string(0), try row.blob(1))
        }
        for (reference, bytes) in stepUps {
            _ = try database.execute(
                "INSERT INTO step_ups (reference, sealed_record) VALUES (?, ?)",
                [.text(reference), .blob(try key.seal(bytes, context: "step_ups|" + reference))])
        }
        try database.executeScript("DROP TABLE clear_cards; DROP TABLE clear_step_ups;")
        return true
    }

    public func account(id: String) async throws -> IssuerAccount? {
        try await store.record(IssuerAccount.self, "SELECT record FROM accounts WHERE account_id = ?", [.text(id)])
    }

    public func saveAccount(_ account: IssuerAccount) async throws {
        try await upsert("accounts", "account_id", account.accountID, account)
    }

    public func card(pan: PrimaryAccountNumber) async throws -> IssuedCard? {
        let lookup = key.lookup(pan.digits)
        return try await sealedRecord(IssuedCard.self, "cards", "pan_lookup", lookup)
    }

    public func saveCard(_ card: IssuedCard) async throws {
        try await upsertSealed("cards", "pan_lookup", key.lookup(card.pan.digits), card)
    }

    public func allCards() async throws -> [IssuedCard] {
        let key = self.key
        let rows = try await store.read { database in
            try database.query("SELECT pan_lookup, sealed_record FROM cards", []) { row in
                (try row.string(0), try row.blob(1))
            }
        }
        return try rows.map { lookup, sealed in
            try RecordCoding.decode(IssuedCard.self, try key.open(sealed, context: "cards|" + lookup))
        }.sorted { $0.pan.digits < $1.pan.digits }
    }

    public func authorization(networkTransactionID: String) async throws -> IssuerAuthorizationEntry? {
        try await store.record(
            IssuerAuthorizationEntry.self, "SELECT record FROM authorizations WHERE network_transaction_id = ?",
            [.text(networkTransactionID)])
    }

    public func saveAuthorization(_ entry: IssuerAuthorizationEntry) async throws {
        try await upsert("authorizations", "network_transaction_id", entry.response.networkTransactionID, entry)
    }

    public func saveAuthorization(_ entry: IssuerAuthorizationEntry, account: IssuerAccount?) async throws {
        let record = try RecordCoding.encode(entry)
        let accountRecord = try account.map { try RecordCoding.encode($0) }
        try await store.write { database in
            if let account, let accountRecord {
                try database.execute(
                    "INSERT INTO accounts (account_id, record) VALUES (?, ?) "
                        + "ON CONFLICT (account_id) DO UPDATE SET record = excluded.record",
                    [.text(account.accountID), .blob(accountRecord)])
            }
            try database.execute(
                "INSERT INTO authorizations (network_transaction_id, record) VALUES (?, ?) "
                    + "ON CONFLICT (network_transaction_id) DO UPDATE SET record = excluded.record",
                [.text(entry.response.networkTransactionID), .blob(record)])
        }
    }

    /// Reads every authorization and filters by date: records are opaque blobs without a date column, and
    /// reconciliation runs minutes apart, so a scan is affordable at this scale.
    public func authorizations(decidedBefore date: Date) async throws -> [IssuerAuthorizationEntry] {
        try await store.records(IssuerAuthorizationEntry.self, "SELECT record FROM authorizations", [])
            .filter { $0.decidedAt < date }.sorted { $0.decidedAt < $1.decidedAt }
    }

    public func stepUp(reference: String) async throws -> StepUpRecord? {
        try await sealedRecord(StepUpRecord.self, "step_ups", "reference", reference)
    }

    public func saveStepUp(_ record: StepUpRecord) async throws {
        try await upsertSealed("step_ups", "reference", record.reference, record)
    }

    /// The record of `table` whose `column` is `id`, opened. `table` and `column` are fixed names from this file.
    private func sealedRecord<T: Decodable & Sendable>(
        _ type: T.Type, _ table: String, _ column: String, _ id: String
    ) async throws -> T? {
        let sealed = try await store.read { database in
            try database.query("SELECT sealed_record FROM \(table) WHERE \(column) = ?", [.text(id)]) { row in
                try row.blob(0)
            }
        }
        guard let sealed = sealed.first else { return nil }
        return try RecordCoding.decode(type, try key.open(sealed, context: table + "|" + id))
    }

    /// Seals `value` as the record of `table` whose `column` is `id`; names as for ``sealedRecord(_:_:_:_:)``.
    private func upsertSealed(_ table: String, _ column: String, _ id: String, _ value: some Encodable) async throws {
        let sealed = try key.seal(try RecordCoding.encode(value), context: table + "|" + id)
        try await store.write { database in
            try database.execute(
                "INSERT INTO \(table) (\(column), sealed_record) VALUES (?, ?) "
                    + "ON CONFLICT (\(column)) DO UPDATE SET sealed_record = excluded.sealed_record",
                [.text(id), .blob(sealed)])
        }
    }

    /// `table` and `column` are fixed names from this file, never input.
    private func upsert(_ table: String, _ column: String, _ id: String, _ value: some Encodable) async throws {
        let record = try RecordCoding.encode(value)
        try await store.write { database in
            try database.execute(
                "INSERT INTO \(table) (\(column), record) VALUES (?, ?) "
                    + "ON CONFLICT (\(column)) DO UPDATE SET record = excluded.record", [.text(id), .blob(record)])
        }
    }
}

/// The acquirer's merchants and authorizations in `acquirer.sqlite`: card numbers only masked.
public final class SQLiteAcquirerStore: AcquirerStore {
    public let store: Store

    public static let migrations = [
        Migration(
            version: 1, name: "acquirer",
            sql: """
                CREATE TABLE merchants (merchant_id TEXT PRIMARY KEY, record BLOB NOT NULL) STRICT;
                CREATE TABLE authorizations (idempotency_key TEXT PRIMARY KEY, record BLOB NOT NULL) STRICT;
                """),
        Migration(
            version: 2, name: "acquirer reversals",
            sql: """
                CREATE TABLE reversals (idempotency_key TEXT PRIMARY KEY, record BLOB NOT NULL) STRICT;
                """),
        // The primary key keeps one Apple merchant ID to one account.
        Migration(
            version: 3, name: "acquirer Apple merchant IDs",
            sql: """
                CREATE TABLE apple_merchant_ids (
                    apple_merchant_id TEXT PRIMARY KEY, merchant_id TEXT NOT NULL) STRICT;
                """),
        // Sent to the network, no result yet: what reconciliation reverses when the client never returns.
        Migration(
            version: 4, name: "acquirer pending authorizations",
            sql: """
                CREATE TABLE pending_authorizations (
                    idempotency_key TEXT PRIMARY KEY, sent_at INTEGER NOT NULL, record BLOB NOT NULL) STRICT;
                CREATE INDEX pending_authorizations_by_age ON pending_authorizations (sent_at);
                """),
    ]

    public convenience init(path: String) throws { try self.init(location: .file(path)) }

    /// Opens (creating and migrating) the store at `location` (a file, or a PostgreSQL schema).
    public init(location: StoreLocation) throws {
        store = try Store(location: location, options: RecordCoding.options, migrations: Self.migrations)
    }

    public func merchant(id: String) async throws -> MerchantAccount? {
        try await store.record(MerchantAccount.self, "SELECT record FROM merchants WHERE merchant_id = ?", [.text(id)])
    }

    public func saveMerchant(_ merchant: MerchantAccount) async throws {
        let record = try RecordCoding.encode(merchant)
        try await store.write { database in
            try database.execute(
                """
                INSERT INTO merchants (merchant_id, record) VALUES (?, ?)
                ON CONFLICT (merchant_id) DO UPDATE SET record = excluded.record
                """, [.text(merchant.merchantID), .blob(record)])
        }
    }

    public func merchantID(forAppleMerchantID appleMerchantID: String) async throws -> String? {
        try await store.read { database in
            try database.queryFirst(
                "SELECT merchant_id FROM apple_merchant_ids WHERE apple_merchant_id = ?", [.text(appleMerchantID)]
            ) { row in try row.string(0) }
        }
    }

    public func saveAppleMerchantID(_ appleMerchantID: String, merchantID: String) async throws {
        let owner: String? = try await store.write { database in
            try database.execute(
                "INSERT INTO apple_merchant_ids (apple_merchant_id, merchant_id) VALUES (?, ?) "
                    + "ON CONFLICT (apple_merchant_id) DO NOTHING", [.text(appleMerchantID), .text(merchantID)])
            return try database.queryFirst(
                "SELECT merchant_id FROM apple_merchant_ids WHERE apple_merchant_id = ?", [.text(appleMerchantID)]
            ) { row in try row.string(0) }
        }
        guard owner == merchantID else {
            throw AcquirerError(.duplicate, "another merchant account already charges for this merchant ID")
        }
    }

    public func authorization(idempotencyKey: String) async throws -> AcquirerAuthorizationRecord? {
        try await store.record(
            AcquirerAuthorizationRecord.self, "SELECT record FROM authorizations WHERE idempotency_key = ?",
            [.text(idempotencyKey)])
    }

    public func saveAuthorization(_ record: AcquirerAuthorizationRecord) async throws {
        try await saveSettling(record.idempotencyKey, try RecordCoding.encode(record), in: "authorizations")
    }

    /// Upserts a result or a reversal of `key` into `table` and, in the same transaction, removes the key's pending
    /// record: either settles the authorization.
    private func saveSettling(_ key: String, _ bytes: [UInt8], in table: StaticString) async throws {
        let upsert = """
            INSERT INTO \(table) (idempotency_key, record) VALUES (?, ?)
            ON CONFLICT (idempotency_key) DO UPDATE SET record = excluded.record
            """
        try await store.write { database in
            try database.execute(upsert, [.text(key), .blob(bytes)])
            try database.execute("DELETE FROM pending_authorizations WHERE idempotency_key = ?", [.text(key)])
        }
    }

    public func savePendingAuthorization(_ pending: AcquirerPendingAuthorization) async throws {
        let bytes = try RecordCoding.encode(pending)
        try await store.write { database in
            try database.execute(
                """
                INSERT INTO pending_authorizations (idempotency_key, sent_at, record) VALUES (?, ?, ?)
                ON CONFLICT (idempotency_key) DO UPDATE SET sent_at = excluded.sent_at, record = excluded.record
                """, [.text(pending.idempotencyKey), .milliseconds(pending.sentAt), .blob(bytes)])
        }
    }

    public func pendingAuthorizations(sentBefore date: Date) async throws -> [AcquirerPendingAuthorization] {
        try await store.records(
            AcquirerPendingAuthorization.self,
            "SELECT record FROM pending_authorizations WHERE sent_at < ? ORDER BY sent_at, idempotency_key",
            [.milliseconds(date)])
    }

    public func reversal(idempotencyKey: String) async throws -> AcquirerReversalRecord? {
        try await store.record(
            AcquirerReversalRecord.self, "SELECT record FROM reversals WHERE idempotency_key = ?",
            [.text(idempotencyKey)])
    }

    public func saveReversal(_ record: AcquirerReversalRecord) async throws {
        try await saveSettling(record.idempotencyKey, try RecordCoding.encode(record), in: "reversals")
    }
}
