import CardBasics
import Foundation
import OrchardCrypto
import OrchardStore
import SecureElement
import Wallet

/// The device's SQLite file (`device-<name>.sqlite`): one connection, used under a lock, every write in its
/// own `BEGIN IMMEDIATE` transaction with `synchronous=FULL` (an ATC is on disk when the write returns) and
/// `secure_delete` (deleted applets are overwritten).
///
/// Synchronous on purpose: the Secure Element stores a card's ATC inside one APDU exchange, before it
/// computes the cryptogram.
final class DeviceDatabase: @unchecked Sendable {
    // @unchecked: the connection is used only while `lock` is held.
    private let lock = NSLock()
    private let database: Database
    let path: String

    static let migrations = [
        Migration(
            version: 1, name: "device",
            sql: """
                CREATE TABLE device (
                    id INTEGER PRIMARY KEY CHECK (id = 1),
                    name TEXT NOT NULL,
                    kind TEXT NOT NULL,
                    biometry TEXT NOT NULL,
                    account TEXT NOT NULL,
                    created_at INTEGER NOT NULL,
                    element_public_key BLOB NOT NULL,
                    enclave_public_key BLOB NOT NULL
                );
                CREATE TABLE sealed_records (
                    owner TEXT NOT NULL,
                    kind TEXT NOT NULL,
                    id TEXT NOT NULL,
                    sealed BLOB NOT NULL,
                    PRIMARY KEY (owner, kind, id)
                ) WITHOUT ROWID;
                CREATE TABLE wallet_cards (
                    id TEXT PRIMARY KEY,
                    network TEXT NOT NULL,
                    type TEXT NOT NULL,
                    suffix TEXT NOT NULL,
                    device_account_suffix TEXT NOT NULL,
                    display_name TEXT NOT NULL,
                    state TEXT NOT NULL,
                    automatic_selection INTEGER NOT NULL,
                    added_at INTEGER NOT NULL
                );
                CREATE TABLE wallet_settings (
                    id INTEGER PRIMARY KEY CHECK (id = 1),
                    allow_website_queries INTEGER NOT NULL,
                    double_click_presents_cards INTEGER NOT NULL,
                    default_card TEXT
                );
                CREATE TABLE wallet_contacts (
                    role TEXT PRIMARY KEY,
                    sealed BLOB NOT NULL
                );
                """
        ),
        Migration(
            version: 2, name: "wallet-handoff",
            sql: """
                ALTER TABLE wallet_settings ADD COLUMN room TEXT NOT NULL DEFAULT 'home';
                ALTER TABLE wallet_settings ADD COLUMN allow_payments_on_mac INTEGER NOT NULL DEFAULT 1;
                """),
        Migration(
            version: 3, name: "lost-mode",
            sql: """
                ALTER TABLE device ADD COLUMN lost_mode INTEGER NOT NULL DEFAULT 0;
                """),
    ]

    init(path: String) throws(StoreError) {
        database = try Database(path: path, options: StoreOptions(durability: .full, secureDelete: true))
        _ = try database.migrate(Self.migrations)
        self.path = path
    }

    func read<T>(_ body: (Database) throws -> T) throws -> T {
        try lock.withLock { try database.transaction(.deferred, body) }
    }

    @discardableResult
    func write<T>(_ body: (Database) throws -> T) throws -> T {
        try lock.withLock { try database.transaction(.immediate, body) }
    }

    /// Writes the WAL back into the database file (for tools that copy or inspect the file).
    func checkpoint() throws {
        try lock.withLock { try database.checkpoint() }
    }
}

/// The Secure Element's or Secure Enclave's records in the `sealed_records` table.
struct SealedRecordTable: SealedRecordStorage {
    let database: DeviceDatabase
    let owner: String

    func records(kind: String) throws -> [(id: String, sealed: [UInt8])] {
        try database.read { db in
            try db.query(
                "SELECT id, sealed FROM sealed_records WHERE owner = ? AND kind = ? ORDER BY id",
                [
                    .text(owner), .text(kind),
                ]
            ) { row in (id: try row.string(0), sealed: try row.blob(1)) }
        }
    }

    func apply(_ changes: [SealedRecordChange]) throws {
        try database.write { db in
            for change in changes {
                if let sealed = change.sealed {
                    try db.execute(
                        "INSERT OR REPLACE INTO sealed_records (owner, kind, id, sealed) VALUES (?, ?, ?, ?)",
                        [.text(owner), .text(change.kind), .text(change.id), .blob(sealed)])
                } else {
                    try db.execute(
                        "DELETE FROM sealed_records WHERE owner = ? AND kind = ? AND id = ?",
                        [.text(owner), .text(change.kind), .text(change.id)])
                }
            }
        }
    }
}

/// The wallet's tables. Cards and settings are display data (no DPAN); recent contacts are personal data
/// and stored encrypted under the device storage key.
struct WalletTables: WalletStorage {
    let database: DeviceDatabase
    let sealer: RecordSealer

    func loadCards() throws -> [WalletCard] { try Self.cards(database) }

    /// The wallet's cards (display data, readable without the storage key).
    static func cards(_ database: DeviceDatabase) throws -> [WalletCard] {
        try database.read { db in
            try db.query(
                """
                SELECT id, network, type, suffix, device_account_suffix, display_name, state, automatic_selection,
                       added_at
                FROM wallet_cards ORDER BY added_at, id
                """
            ) { row in
                guard let type = CardType(rawValue: try row.string(2)),
                    let state = CardState(rawValue: try row.string(6))
                else { throw DeviceError(.storageFailure, "a wallet card row has an unknown type or state") }
                return try WalletCard(
                    id: try row.string(0), network: try row.string(1), type: type, suffix: try row.string(3),
                    deviceAccountSuffix: try row.string(4), displayName: try row.string(5), state: state,
                    automaticSelection: try row.bool(7), addedAt: try row.date(8))
            }
        }
    }

    func saveCard(_ card: WalletCard) throws {
        try database.write { db in
            try db.execute(
                """
                INSERT OR REPLACE INTO wallet_cards
                    (id, network, type, suffix, device_account_suffix, display_name, state, automatic_selection,
                     added_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
                [
                    .text(card.id), .text(card.network), .text(card.type.rawValue), .text(card.suffix),
                    .text(card.deviceAccountSuffix), .text(card.displayName), .text(card.state.rawValue),
                    .bool(card.automaticSelection), .milliseconds(card.addedAt),
                ])
        }
    }

    func deleteCard(id: String) throws {
        try database.write { db in _ = try db.execute("DELETE FROM wallet_cards WHERE id = ?", [.text(id)]) }
    }

    func loadSettings() throws -> (settings: WalletSettings, defaultCardID: String?) {
        try database.read { db in
            try db.queryFirst(
                """
                SELECT allow_website_queries, double_click_presents_cards, default_card, room, allow_payments_on_mac
                FROM wallet_settings
                """
            ) { row in
                (
                    WalletSettings(
                        allowWebsiteQueries: try row.bool(0), doubleClickPresentsCards: try row.bool(1),
                        room: try row.string(3), allowPaymentsOnMac: try row.bool(4)),
                    try row.optionalString(2)
                )
            } ?? (WalletSettings(), nil)
        }
    }

    func saveSettings(_ settings: WalletSettings, defaultCardID: String?) throws {
        try database.write { db in
            try db.execute(
                """
                INSERT OR REPLACE INTO wallet_settings
                    (id, allow_website_queries, double_click_presents_cards, default_card, room, allow_payments_on_mac)
                VALUES (1, ?, ?, ?, ?, ?)
                """,
                [
                    .bool(settings.allowWebsiteQueries), .bool(settings.doubleClickPresentsCards),
                    .optional(defaultCardID), .text(settings.room), .bool(settings.allowPaymentsOnMac),
                ])
        }
    }

    func loadRecentContacts(_ role: ContactRole) throws -> [Contact] {
        let sealed = try database.read { db in
            try db.queryFirst("SELECT sealed FROM wallet_contacts WHERE role = ?", [.text(role.rawValue)]) {
                try $0.blob(0)
            }
        }
        guard let sealed else { return [] }
        let plain = try sealer.open(sealed, kind: "contacts", id: role.rawValue)
        return try plain.withUnsafeBytes { try JSONDecoder().decode([Contact].self, from: Data($0)) }
    }

    func saveRecentContacts(_ contacts: [Contact], role: ContactRole) throws {
        var json = try JSONEncoder().encode(contacts)
        defer { json.resetBytes(in: 0..<json.count) }
        let sealed = try sealer.seal(SecureBytes(json), kind: "contacts", id: role.rawValue)
        try database.write { db in
            try db.execute(
                "INSERT OR REPLACE INTO wallet_contacts (role, sealed) VALUES (?, ?)",
                [.text(role.rawValue), .blob(sealed)])
        }
    }
}
