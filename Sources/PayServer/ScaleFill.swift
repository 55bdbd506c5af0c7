package import Foundation
package import OrchardCrypto
package import OrchardStore

/// The Pay server's payment nonces as `orchard bench scale` drives them: filled with used nonces (the table's
/// steady state: a keyed hash kept until twice the nonce's lifetime after its issue, so a million rows are the last
/// two minutes of a server making about 8,000 tokens a second), then issued and redeemed through ``PaymentNonces``.
package struct BenchmarkNonces: Sendable {
    let store: Store
    let nonces: PaymentNonces
    let random: any RandomSource

    /// Nonces in `store` (a Pay server store) under a fresh hash key.
    package init(store: Store, clock: SystemClock, random: any RandomSource) {
        self.store = store
        self.random = random
        nonces = PaymentNonces(
            store: store, hashKey: SymmetricKey(bitCount: 256, using: random), monotonic: clock, wall: clock,
            random: random)
    }

    /// Inserts `count` used nonces in one transaction, purged an hour after `now`: later than the bench's own
    /// issues, so no issue has to delete the filled rows and the table stays at its size while it is measured.
    package func insertUsed(count: Int, at now: Date) async throws {
        let hashes = (0..<count).map { _ in random.bytes(32) }
        let purgeAfter = now.addingTimeInterval(3600)
        try await store.write { db in
            for hash in hashes {
                try db.execute(
                    "INSERT INTO payment_nonces (nonce_hash, used, purge_after) VALUES (?, 1, ?)",
                    [.blob(hash), .milliseconds(purgeAfter)])
            }
        }
    }

    /// A fresh nonce for `device` (``PaymentNonces/issue(to:)``, with its purge of past rows).
    package func issue(to device: String) async throws -> [UInt8] { try await nonces.issue(to: device) }

    /// Redeems `nonce` in a write transaction of its own (``PaymentNonces/consume(_:device:in:)``).
    package func redeem(_ nonce: [UInt8], device: String) async throws {
        let nonces = self.nonces
        try await store.write { db in try nonces.consume(nonce, device: device, in: db) }
    }
}
