import OrchardStore

/// The in-app tables of `pay.sqlite`, one migration appended to ``PayStore/migrations``.
///
/// - `payment_nonces`: one row per issued nonce, keyed by its keyed hash (never the nonce); `device`,
///   `boot_id` and `issued_at_ns` exist only while the nonce is outstanding and are set to NULL when it is
///   used; `purge_after` (ms since 1970) decides when the row goes.
/// - `payment_records`: the anonymous record of each accepted credential: channel, currency, an amount
///   bucket and the day. No merchant, app, device, card, nonce or item; nothing joins it to another table.
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
        CREATE TABLE payment_records (
            channel TEXT NOT NULL CHECK (channel IN ('in-app', 'web')),
            currency TEXT NOT NULL,
            amount_bucket TEXT NOT NULL,
            day TEXT NOT NULL
        ) STRICT;
        """

    /// An approximate amount: the decade of minor units it falls in (`"1000-9999"`), never the amount.
    static func amountBucket(_ minorUnits: Int64) -> String {
        guard minorUnits >= 10 else { return "0-9" }
        var low: Int64 = 10
        while low <= minorUnits / 10 { low *= 10 }
        return "\(low)-\(low * 10 - 1)"
    }
}
