import OrchardCrypto
import OrchardStore

/// The in-app tables of `pay.sqlite`, one migration appended to ``PayStore/migrations``.
///
/// - `payment_nonces`: one row per issued nonce, keyed by its keyed hash (never the nonce); `device`,
///   `boot_id` and `issued_at_ns` exist only while the nonce is outstanding and are set to NULL when it is
///   used; `purge_after` (ms since 1970) decides when the row goes.
/// - `in_app_purchase_tallies`: counters of accepted credentials per channel, currency, value band and day
///   (not one row per purchase, so not even the order of arrival is kept). No merchant, app, device, card,
///   nonce or item; no column shares a name with another table's.
enum InAppStore {
    static let migrationName = "in-app payments: nonces and anonymous payment records"
    static let migrationSQL = """
        CREATE TABLE payment_nonces (
            nonce_hash BLOB PRIMARY KEY,
            device TEXT,
            boot_id TEXT,
            issued_at_ns INTEGER,
            used INTEGER NOT NULL CHECK (used IN (0, 1)),
            purge_after INTEGER NOT NULL,
            CHECK ((used = 0) = (device IS NOT NULL AND boot_id IS NOT NULL AND issued_at_ns IS NOT NULL))
        ) STRICT, WITHOUT ROWID;
        CREATE INDEX payment_nonces_by_purge ON payment_nonces(purge_after);
        CREATE TABLE in_app_purchase_tallies (
            payment_channel TEXT NOT NULL CHECK (payment_channel IN ('in-app', 'web')),
            currency_code TEXT NOT NULL,
            value_band TEXT NOT NULL,
            purchase_day TEXT NOT NULL,
            purchases INTEGER NOT NULL CHECK (purchases > 0),
            PRIMARY KEY (payment_channel, currency_code, value_band, purchase_day)
        ) STRICT, WITHOUT ROWID;
        """

    /// Migration 10: the tallies split over ``shards`` rows per key (`tally_shard`), so that instances on one
    /// PostgreSQL database counting at once rarely update the same row (one row per key was updated by every
    /// exchange, and two instances' SERIALIZABLE transactions on it failed each other until none got through).
    /// Existing counts move to shard 0; a total is the sum over the shards.
    static let shardMigrationName = "in-app purchase tallies split over shards"
    static let shardMigrationSQL = """
        CREATE TABLE in_app_purchase_tallies_sharded (
            payment_channel TEXT NOT NULL CHECK (payment_channel IN ('in-app', 'web')),
            currency_code TEXT NOT NULL,
            value_band TEXT NOT NULL,
            purchase_day TEXT NOT NULL,
            tally_shard INTEGER NOT NULL CHECK (tally_shard >= 0 AND tally_shard < 16),
            purchases INTEGER NOT NULL CHECK (purchases > 0),
            PRIMARY KEY (payment_channel, currency_code, value_band, purchase_day, tally_shard)
        ) STRICT, WITHOUT ROWID;
        INSERT INTO in_app_purchase_tallies_sharded
            (payment_channel, currency_code, value_band, purchase_day, tally_shard, purchases)
            SELECT payment_channel, currency_code, value_band, purchase_day, 0, purchases FROM in_app_purchase_tallies;
        DROP TABLE in_app_purchase_tallies;
        ALTER TABLE in_app_purchase_tallies_sharded RENAME TO in_app_purchase_tallies;
        """

    /// Rows per tally key on a shared store.
    static let shards = 16

    /// Counts one accepted credential (inside the exchange's transaction), in shard 0 on SQLite, where one process
    /// writes, and in a shard drawn from `random` on PostgreSQL.
    static func tally(
        channel: String, currency: String, minorUnits: Int64, day: String, random: any RandomSource, in db: Database
    ) throws {
        let shard = db.isPostgreSQL ? Int64(random.bytes(1)[0]) % Int64(shards) : 0
        try db.execute(
            """
            INSERT INTO in_app_purchase_tallies
                (payment_channel, currency_code, value_band, purchase_day, tally_shard, purchases)
            VALUES (?, ?, ?, ?, ?, 1)
            ON CONFLICT (payment_channel, currency_code, value_band, purchase_day, tally_shard)
            DO UPDATE SET purchases = in_app_purchase_tallies.purchases + 1
            """,
            [
                .text(channel), .text(currency), .text(amountBucket(minorUnits)), .text(day),
                .integer(shard),
            ])
    }

    /// An approximate amount: the decade of minor units it falls in (`"1000-9999"`), never the amount.
    static func amountBucket(_ minorUnits: Int64) -> String {
        guard minorUnits >= 10 else { return "0-9" }
        var low: Int64 = 10
        while low <= minorUnits / 10 { low *= 10 }
        return "\(low)-\(low * 10 - 1)"
    }
}
