import Foundation
import OrchardCrypto
import OrchardStore

/// The Pay server's single-use nonces for in-app and web payment credentials (table `payment_nonces`).
///
/// Guarantees:
/// - a nonce is 32 random bytes, issued to one device (the client certificate's device name);
/// - it is stored durably (pay.sqlite, synchronous FULL) as a keyed hash only (HMAC-SHA256 under a key
///   derived from the credential key), never in clear;
/// - on SQLite (one process owns the file) it is valid for ``lifetime`` on the monotonic clock of the boot it was
///   issued in (a nonce from before a reboot is expired: monotonic time restarts, so it fails closed); a
///   wall-clock change moves nothing;
/// - on PostgreSQL (several instances of the Pay server on one database, on several hosts) it is valid for
///   ``lifetime`` on the database's clock (``Database/databaseClockMicroseconds()``), the one clock every
///   instance reads: any instance redeems it, and it expires at the same instant for all of them;
/// - ``consume(_:device:in:)`` runs inside the caller's write transaction, so the nonce is used exactly when
///   the request that uses it is recorded; afterwards the row keeps only the keyed hash (the device link and
///   issue time are deleted) until the purge time set at issue, twice ``lifetime`` later, as an unused row's; a
///   purged nonce is unknown, and refused as well.
final class PaymentNonces: Sendable {
    /// 60 s, on the monotonic clock.
    static let lifetime: UInt64 = 60 * 1_000_000_000
    static let byteCount = 32
    /// The `boot_id` of a nonce timed by the database's clock (PostgreSQL), which no host's boot ID equals.
    static let databaseClockID = "database-clock"

    private let store: Store
    private let hashKey: SymmetricKey
    private let monotonic: any MonotonicClock
    private let wall: any WallClock
    private let random: any RandomSource
    private let bootID: String

    init(
        store: Store, hashKey: SymmetricKey, monotonic: any MonotonicClock, wall: any WallClock,
        random: any RandomSource, bootID: String = PaymentNonces.currentBootID()
    ) {
        self.store = store
        self.hashKey = hashKey
        self.monotonic = monotonic
        self.wall = wall
        self.random = random
        self.bootID = bootID
    }

    /// The kernel's boot identifier, or a random one for this process when it cannot be read (nonces of an
    /// earlier process then count as expired: failing closed).
    static func currentBootID() -> String {
        // try?: without the file a random identifier fails closed, as documented above.
        if let text = try? String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8) {
            let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
            if !trimmed.isEmpty { return trimmed }
        }
        return UUID().uuidString
    }

    func keyedHash(_ nonce: [UInt8]) -> [UInt8] { HMAC<SHA256>.authenticationCode(for: nonce, using: hashKey) }

    /// A fresh nonce for `device`, stored before it is returned. Also purges rows past their purge time.
    func issue(to device: String) async throws -> [UInt8] {
        let nonce = random.bytes(Self.byteCount)
        let hash = keyedHash(nonce)
        let localIssuedAt = monotonic.nanoseconds()
        let wall = self.wall
        let localBootID = self.bootID
        try await store.write { db in
            let shared = try db.databaseClockMicroseconds()
            let now = shared.map { $0 / 1000 } ?? wall.now().orchardMilliseconds
            let issuedAt = shared.map { UInt64($0) &* 1000 } ?? localIssuedAt
            let bootID = shared == nil ? localBootID : Self.databaseClockID
            // An unused nonce's row (with its device link) goes at the first purge after twice its lifetime.
            let purgeAfter = now + 2 * Int64(Self.lifetime / 1_000_000)
            // On a shared (PostgreSQL) store the purge is left to the periodic pass (``purgeExpired()``): a
            // transaction that both reads the expired range and inserts into it conflicts with every other instance's
            // issue at once (SERIALIZABLE), while inserts alone never do.
            if shared == nil { try db.execute("DELETE FROM payment_nonces WHERE purge_after < ?", [.integer(now)]) }
            try db.execute(
                """
                INSERT INTO payment_nonces (nonce_hash, device, boot_id, issued_at_ns, used, purge_after)
                VALUES (?, ?, ?, ?, 0, ?)
                """,
                [.blob(hash), .text(device), .text(bootID), .integer(Int64(issuedAt)), .integer(purgeAfter)])
        }
        return nonce
    }

    /// On a shared (PostgreSQL) store, deletes the rows past their purge time on the database's clock; the Pay
    /// server runs it with its periodic pass. On SQLite every issue purges already, and this does nothing.
    func purgeExpired() async throws -> Int {
        guard store.location.isPostgreSQL else { return 0 }
        return try await store.write { db in
            guard let shared = try db.databaseClockMicroseconds() else { return 0 }
            return try db.execute("DELETE FROM payment_nonces WHERE purge_after < ?", [.integer(shared / 1000)])
        }
    }

    /// Checks that `nonce` was issued to `device`, is unused and unexpired, and marks it used, inside the
    /// caller's write transaction. Throws the reason otherwise (and changes nothing).
    func consume(_ nonce: [UInt8], device: String, in db: Database) throws {
        let hash = keyedHash(nonce)
        struct Row {
            let device: String?
            let bootID: String?
            let issuedAt: Int64?
            let used: Bool
        }
        guard
            let row = try db.queryFirst(
                "SELECT device, boot_id, issued_at_ns, used FROM payment_nonces WHERE nonce_hash = ?", [.blob(hash)],
                { row in
                    Row(
                        device: try row.optionalString(0), bootID: try row.optionalString(1),
                        issuedAt: try row.optionalInt64(2), used: try row.bool(3))
                })
        else { throw PayServerError(.nonceUnknown, "this nonce was never issued (or has been purged)") }
        guard !row.used else { throw PayServerError(.nonceUsed, "this nonce was already used") }
        guard let owner = row.device, constantTimeEquals(Array(owner.utf8), Array(device.utf8)) else {
            throw PayServerError(.nonceNotIssuedToDevice, "this nonce was issued to another device")
        }
        let shared = try db.databaseClockMicroseconds()
        let (clockID, now) =
            shared.map { (Self.databaseClockID, UInt64($0) &* 1000) } ?? (bootID, monotonic.nanoseconds())
        guard let issuedAt = row.issuedAt, row.bootID == clockID, now &- UInt64(issuedAt) <= Self.lifetime
        else { throw PayServerError(.nonceExpired, "this nonce has expired; ask for a new one") }
        // Keep only the keyed hash, until the purge time set at issue: the row goes when an unused one would. A
        // replay before then is `nonceUsed`; after it `nonceUnknown`, refused too (the nonce had expired long
        // before). `purge_after` is left as it is, so its index is not written: a payment changes one B-tree page
        // of this table, not three (docs/performance.md, `bench inapp`).
        try db.execute(
            "UPDATE payment_nonces SET device = NULL, boot_id = NULL, issued_at_ns = NULL, used = 1 WHERE nonce_hash = ?",
            [.blob(hash)])
    }
}
