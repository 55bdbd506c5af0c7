import Foundation
public import OrchardRuntime
import OrchardServices
public import OrchardStore

/// The Pay server's database, `DIR/pay.sqlite`: accounts, the merchant registry, issued merchant
/// certificates and app entitlements (1); registered devices, provisioning sessions, the cards' display data
/// and the token-status notifications waiting for each device (2). No card number and no device account
/// number: the cards are known by the token service's reference and their last four digits.
///
/// Durability `.full` and secure delete: a consumed nonce or session must stay consumed after a crash, and
/// revoked or deleted rows must not linger in the file.
public enum PayStore {
    public static let options = StoreOptions(durability: .full, secureDelete: true)

    public static let migrations: [Migration] = [
        Migration(
            version: 1, name: "accounts, merchants, certificates, entitlements",
            sql: """
                CREATE TABLE accounts (
                    name TEXT PRIMARY KEY,
                    created_at INTEGER NOT NULL
                ) STRICT;
                CREATE TABLE merchants (
                    identifier TEXT PRIMARY KEY,
                    display_name TEXT NOT NULL,
                    created_at INTEGER NOT NULL
                ) STRICT;
                CREATE TABLE merchant_certificates (
                    serial TEXT PRIMARY KEY,
                    merchant_identifier TEXT NOT NULL REFERENCES merchants(identifier),
                    kind TEXT NOT NULL CHECK (kind IN ('processing', 'identity')),
                    der BLOB NOT NULL,
                    not_after INTEGER NOT NULL,
                    revoked_at INTEGER
                ) STRICT;
                CREATE INDEX merchant_certificates_by_merchant ON merchant_certificates(merchant_identifier, kind);
                CREATE TABLE app_entitlements (
                    application TEXT NOT NULL,
                    merchant_identifier TEXT NOT NULL REFERENCES merchants(identifier),
                    PRIMARY KEY (application, merchant_identifier)
                ) STRICT;
                """),
        Migration(
            version: 2, name: "devices, provisioning sessions, card display data, notifications",
            sql: """
                CREATE TABLE devices (
                    device_id TEXT PRIMARY KEY,
                    account TEXT NOT NULL REFERENCES accounts(name),
                    kind TEXT NOT NULL,
                    secure_element_certificate BLOB NOT NULL,
                    registered_at INTEGER NOT NULL,
                    lost_mode INTEGER NOT NULL DEFAULT 0,
                    erased_at INTEGER
                ) STRICT;
                CREATE INDEX devices_by_account ON devices(account);
                CREATE TABLE provisioning_sessions (
                    session_id TEXT PRIMARY KEY,
                    device_id TEXT NOT NULL REFERENCES devices(device_id),
                    created_at INTEGER NOT NULL
                ) STRICT;
                CREATE TABLE device_cards (
                    token_reference TEXT PRIMARY KEY,
                    device_id TEXT NOT NULL REFERENCES devices(device_id),
                    network TEXT NOT NULL,
                    type TEXT NOT NULL,
                    suffix TEXT NOT NULL,
                    description TEXT NOT NULL,
                    state TEXT NOT NULL CHECK (state IN ('active', 'suspended', 'deleted')),
                    added_at INTEGER NOT NULL
                ) STRICT;
                CREATE INDEX device_cards_by_device ON device_cards(device_id);
                CREATE TABLE device_notifications (
                    sequence INTEGER PRIMARY KEY AUTOINCREMENT,
                    device_id TEXT NOT NULL REFERENCES devices(device_id),
                    token_reference TEXT NOT NULL,
                    event TEXT NOT NULL,
                    state TEXT NOT NULL
                ) STRICT;
                CREATE INDEX device_notifications_by_device ON device_notifications(device_id, sequence);
                CREATE TABLE network_feed (
                    id INTEGER PRIMARY KEY CHECK (id = 1),
                    last_sequence INTEGER NOT NULL
                ) STRICT;
                """),
        AnonymousAnalytics.migration(version: 3),
        Migration(version: 4, name: InAppStore.migrationName, sql: InAppStore.migrationSQL),
        // The Secure Enclave key each device registered (passcode attestations), and the challenges that leaving
        // lost mode answers, one outstanding per device.
        Migration(
            version: 5, name: "lost mode left with the passcode",
            sql: """
                ALTER TABLE devices ADD COLUMN enclave_public_key BLOB;
                CREATE TABLE resume_challenges (
                    device_id TEXT PRIMARY KEY REFERENCES devices(device_id),
                    challenge BLOB NOT NULL,
                    expires_at INTEGER NOT NULL
                ) STRICT;
                """),
        Migration(version: 6, name: WebDomains.migrationName, sql: WebDomains.migrationSQL),
        AnonymousAnalytics.dailyMigration(version: 7),
        Migration(version: 8, name: MerchantSessions.migrationName, sql: MerchantSessions.migrationSQL),
        // The relay between a user's devices: each device's relay public keys and the queued (encrypted) frames.
        Migration(version: 9, name: PayServer.relayMigrationName, sql: PayServer.relayMigrationSQL),
        // The in-app tallies over 16 rows per key, for instances counting at once on PostgreSQL.
        Migration(version: 10, name: InAppStore.shardMigrationName, sql: InAppStore.shardMigrationSQL),
        // Merchant tokens of the version 14 payment types: one per merchant and device account.
        Migration(version: 11, name: MerchantTokens.migrationName, sql: MerchantTokens.migrationSQL),
        // Every request with a merchant certificate asks whether it is revoked: an index of the revoked ones alone
        // answers without reading the table.
        Migration(
            version: 12, name: "revoked merchant certificates indexed",
            sql: """
                CREATE INDEX merchant_certificates_revoked ON merchant_certificates(der) WHERE revoked_at IS NOT NULL;
                """),
        // A processing certificate a merchant had issued to its processor's key through its portal: who that is;
        // and when each certificate was issued, which orders two that expire in the same second.
        Migration(
            version: 13, name: "merchant certificates' processor and issue time",
            sql: """
                ALTER TABLE merchant_certificates ADD COLUMN processor TEXT;
                ALTER TABLE merchant_certificates ADD COLUMN issued_at INTEGER;
                """),
        // Domains re-checked daily, retried when unreachable, and failed at once on a wrong or missing file.
        Migration(version: 14, name: WebDomains.stateMigrationName, sql: WebDomains.stateMigrationSQL),
    ]

    /// Opens the Pay server's store of the deployment in `directory` (its `config.json` says where), for commands
    /// that work on it directly.
    public static func open(in directory: DeploymentDirectory) throws -> Store {
        try Store(
            location: try StoreSettings.location(for: .pay, in: directory), options: options, migrations: migrations)
    }

    /// Whether the deployment in `directory` has a Pay server store: `DIR/pay.sqlite`, or a PostgreSQL database.
    public static func exists(in directory: DeploymentDirectory) -> Bool {
        // try?: a config.json that cannot be read counts as a deployment with a store; opening it reports why.
        guard case .file(let path) = try? StoreSettings.location(for: .pay, in: directory) else {
            return FileManager.default.fileExists(atPath: directory.configurationPath)
        }
        return FileManager.default.fileExists(atPath: path)
    }

    /// Opens (creating and migrating) `DIR/pay.sqlite`, or the `pay` schema of the PostgreSQL database
    /// `configuration` names (`pay.database`).
    public static func open(
        in directory: DeploymentDirectory, configuration: Configuration
    ) throws(StoreError) -> Store {
        try Store(
            location: try StoreSettings.location(for: .pay, configuration: configuration, directory: directory),
            options: options, migrations: migrations)
    }
}
