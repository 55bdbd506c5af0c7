import CommandTestSupport
import Foundation
import OrchardCrypto
import OrchardRuntime
import OrchardStore
import Testing

@testable import PayServer

/// The nonce store on its own: durability across a reopened store, the boot check, purging.
@Suite("Pay server: payment nonces")
struct PaymentNonceTests {
    let temporary: TemporaryDirectory
    let directory: DeploymentDirectory
    let clock = ManualClock(now: Date(timeIntervalSince1970: 1_772_366_400))
    let key = SymmetricKey(data: [UInt8](repeating: 9, count: 32))
    init() throws {
        temporary = try TemporaryDirectory()
        directory = DeploymentDirectory(path: temporary.child("deployment"))
        try directory.create()
    }

    func nonces(_ store: Store, boot: String = "boot-1") -> PaymentNonces {
        PaymentNonces(
            store: store, hashKey: key, monotonic: clock, wall: clock,
            random: SystemRandom(), bootID: boot)
    }

    func consume(_ nonces: PaymentNonces, _ nonce: [UInt8], _ device: String, _ store: Store) async throws {
        try await store.write { db in try nonces.consume(nonce, device: device, in: db) }
    }

    func expectRefusal(
        _ code: PayServerError.Code, sourceLocation: SourceLocation = #_sourceLocation, _ body: () async throws -> Void
    ) async {
        do {
            try await body()
            Issue.record("expected \(code)", sourceLocation: sourceLocation)
        } catch let error as PayServerError {
            #expect(error.code == code, sourceLocation: sourceLocation)
        } catch {
            Issue.record("expected \(code), got \(error)", sourceLocation: sourceLocation)
        }
    }

    @Test("A nonce survives a reopened store; it is stored only as a keyed hash; a reboot expires it")
    func durableAndBootBound() async throws {
        var store = try PayStore.open(in: directory)
        let first = try await nonces(store).issue(to: "phone-a")
        let second = try await nonces(store).issue(to: "phone-a")
        #expect(first.count == 32 && first != second)
        let stored = try await store.read { db in
            try db.query("SELECT nonce_hash FROM payment_nonces", []) { try $0.blob(0) }
        }
        #expect(
            Set(stored) == [
                HMAC<SHA256>.authenticationCode(for: first, using: key),
                HMAC<SHA256>.authenticationCode(for: second, using: key),
            ])
        await store.close()

        store = try PayStore.open(in: directory)
        try await consume(nonces(store), first, "phone-a", store)
        await expectRefusal(.nonceUsed) { try await consume(nonces(store), first, "phone-a", store) }
        // The same store after a reboot: the monotonic clock restarted, so the outstanding nonce is expired.
        await expectRefusal(.nonceExpired) {
            try await consume(nonces(store, boot: "boot-2"), second, "phone-a", store)
        }
        await store.close()
    }

    @Test("Used rows keep only the hash; used or not, a row goes at the first nonce issued 120 s after its own")
    func purge() async throws {
        let store = try PayStore.open(in: directory)
        let used = try await nonces(store).issue(to: "phone-a")
        let unused = try await nonces(store).issue(to: "phone-a")
        let purgeTimes = try await store.read { db in
            try db.query("SELECT purge_after FROM payment_nonces", []) { try $0.int64(0) }
        }
        try await consume(nonces(store), used, "phone-a", store)
        let row = try await store.read { db in
            try db.queryFirst(
                "SELECT device IS NULL AND boot_id IS NULL AND issued_at_ns IS NULL FROM payment_nonces WHERE used = 1",
                [], { try $0.bool(0) })
        }
        #expect(row == true)
        // Using a nonce leaves its purge time as it was (its index is not written).
        let after = try await store.read { db in
            try db.query("SELECT purge_after FROM payment_nonces", []) { try $0.int64(0) }
        }
        #expect(after.sorted() == purgeTimes.sorted())
        func count() async throws -> Int? {
            try await store.read { db in
                try db.queryFirst("SELECT count(*) FROM payment_nonces", [], { try $0.int(0) })
            }
        }
        clock.advance(by: 119)
        _ = try await nonces(store).issue(to: "phone-b")
        #expect(try await count() == 3)
        await expectRefusal(.nonceUsed) { try await consume(nonces(store), used, "phone-a", store) }
        clock.advance(by: 2)
        _ = try await nonces(store).issue(to: "phone-b")
        #expect(try await count() == 2)
        await expectRefusal(.nonceUnknown) { try await consume(nonces(store), used, "phone-a", store) }
        await expectRefusal(.nonceUnknown) { try await consume(nonces(store), unused, "phone-a", store) }
        await store.close()
    }

    @Test(
        "A3: on PostgreSQL a nonce issued by one instance is redeemed by another, once, and expires on the database's clock",
        .enabled(if: TestPostgreSQL.enabled, Comment(rawValue: TestPostgreSQL.installHint)))
    func sharedAcrossInstancesOnTheDatabaseClock() async throws {
        let location = StoreLocation.postgreSQL(
            try PostgreSQLLocation(
                url: try await TestPostgreSQL.shared().url, schema: TestPostgreSQL.freshSchema("pay")))
        let storeA = try Store(location: location, options: PayStore.options, migrations: PayStore.migrations)
        let storeB = try Store(location: location, options: PayStore.options, migrations: PayStore.migrations)
        // Two hosts: other boot IDs, monotonic clocks an hour apart; neither decides.
        let clockB = ManualClock(now: Date(timeIntervalSince1970: 1_772_366_400))
        clockB.advance(by: 3600)
        let instanceA = nonces(storeA, boot: "host-a")
        let instanceB = PaymentNonces(
            store: storeB, hashKey: key, monotonic: clockB, wall: clockB, random: SystemRandom(), bootID: "host-b")
        let nonce = try await instanceA.issue(to: "phone-a")
        let clockID = try await storeB.read { db in
            try db.queryFirst("SELECT boot_id FROM payment_nonces", [], { try $0.string(0) })
        }
        #expect(clockID == PaymentNonces.databaseClockID)
        await expectRefusal(.nonceNotIssuedToDevice) { try await consume(instanceB, nonce, "phone-b", storeB) }
        try await consume(instanceB, nonce, "phone-a", storeB)
        await expectRefusal(.nonceUsed) { try await consume(instanceA, nonce, "phone-a", storeA) }

        // Both instances redeem one nonce at once: exactly one succeeds.
        let raced = try await instanceB.issue(to: "phone-a")
        async let first: Bool = (try? await consume(instanceA, raced, "phone-a", storeA)) != nil
        async let second: Bool = (try? await consume(instanceB, raced, "phone-a", storeB)) != nil
        let outcomes = await [first, second]
        #expect(outcomes.filter { $0 }.count == 1)

        // A nonce 5 s old on the database's clock is still good (55 s to spare on a loaded machine); one 61 s old is
        // expired, on every instance.
        let young = try await instanceA.issue(to: "phone-a")
        let old = try await instanceA.issue(to: "phone-a")
        try await storeA.write { db in
            try db.execute(
                "UPDATE payment_nonces SET issued_at_ns = issued_at_ns - ? WHERE nonce_hash = ?",
                [.integer(5_000_000_000), .blob(HMAC<SHA256>.authenticationCode(for: young, using: key))])
            try db.execute(
                "UPDATE payment_nonces SET issued_at_ns = issued_at_ns - ? WHERE nonce_hash = ?",
                [.integer(61_000_000_000), .blob(HMAC<SHA256>.authenticationCode(for: old, using: key))])
        }
        await expectRefusal(.nonceExpired) { try await consume(instanceB, old, "phone-a", storeB) }
        await expectRefusal(.nonceExpired) { try await consume(instanceA, old, "phone-a", storeA) }
        try await consume(instanceB, young, "phone-a", storeB)
        await storeA.close()
        await storeB.close()
    }
}
