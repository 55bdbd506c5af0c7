import Foundation
public import OrchardRuntime
public import OrchardStore

/// The Pay server's database, `DIR/pay.sqlite`: accounts, the merchant registry, issued merchant
/// certificates and app entitlements. Later issues add nonces, sessions and the IDS directory as further
/// migrations.
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
        AnonymousAnalytics.migration(version: 2),
    ]

    /// Opens (creating and migrating) `DIR/pay.sqlite`.
    public static func open(in directory: DeploymentDirectory) throws(StoreError) -> Store {
        try Store(path: directory.databasePath(for: .pay), options: options, migrations: migrations)
    }
}
